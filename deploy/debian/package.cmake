# The Debian package (CPack DEB): what `scripts/package.sh` builds into build/package/.
#   /usr/bin/scangate                      the binary (stripped)
#   /usr/share/man/man8/scangate.8.gz      scangate(8): deploy/debian/scangate.8.in + `scangate --help` (man_page.sh)
#   /lib/systemd/system/scangate.service   the unit (deploy/debian/scangate.service)
#   /etc/scangate/scangate.conf            the configuration file (conffile)
#   /etc/default/scangate                  the unit's environment file, mode 0600 (conffile)
#   /usr/share/scangate/sql/               the migrations (the binary embeds and applies them; for reading);
#                                          sql/proxy/: the PL/Proxy database's functions
#   /usr/share/doc/scangate/               README.Debian (docs/install.md), README.md, openapi.yaml, docs/,
#                                          changelog (CHANGELOG.md), changelog.Debian, NEWS.Debian, copyright
#                                          (DEP-5), examples/
#                                          (deploy/debian/package_docs.sh: compressed as Debian policy says)
#   /usr/share/lintian/overrides/scangate  lintian's overrides, each with its reason (deploy/debian/lintian-overrides)
# Depends are computed from the binary by dpkg-shlibdeps. Maintainer scripts: deploy/debian/{postinst,prerm,postrm}.
# Targets: scangate_man and scangate_package_files (the documentation and the man page; built by
# scripts/package.sh and the Dockerfile before cpack, not by all: it needs docs/install.md and dpkg-dev).
# Checks: ctest man_page; lintian and the install test in deploy/debian/package_test.sh.
# Included from the top-level CMakeLists.txt (not with SCANGATE_CORE_ONLY).
set(SCANGATE_DEB_DIR ${PROJECT_SOURCE_DIR}/deploy/debian)

set(SCANGATE_PACKAGE_STAGING ${CMAKE_BINARY_DIR}/package/staging)
set(SCANGATE_HOMEPAGE "https://a-seed-da1ea87f.example/scangate" CACHE STRING
    "the project's home page: the package's Homepage field and its copyright file's Source")
set(SCANGATE_MAINTAINER "scangate maintainers <maintainers@users.noreply.a-seed-da1ea87f.example>")
set(SCANGATE_DEB_RELEASE 1)

# scangate(8): the hand-written page with the OPTIONS of the binary's own --help.
set(SCANGATE_MAN_PAGE ${CMAKE_BINARY_DIR}/package/scangate.8)
add_custom_command(
  OUTPUT ${SCANGATE_MAN_PAGE}
  COMMAND ${SCANGATE_DEB_DIR}/man_page.sh $<TARGET_FILE:scangate> ${SCANGATE_DEB_DIR}/scangate.8.in ${SCANGATE_MAN_PAGE}
  DEPENDS scangate ${SCANGATE_DEB_DIR}/man_page.sh ${SCANGATE_DEB_DIR}/scangate.8.in
  COMMENT "Generating the man page scangate(8)"
  VERBATIM)
add_custom_target(scangate_man DEPENDS ${SCANGATE_MAN_PAGE})

# The documentation, laid out by package_docs.sh in the staging directory installed below.
configure_file(${SCANGATE_DEB_DIR}/copyright.in ${CMAKE_BINARY_DIR}/package/copyright @ONLY)
file(GLOB SCANGATE_DOC_PAGES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md)
set(SCANGATE_PACKAGE_STAMP ${SCANGATE_PACKAGE_STAGING}/.stamp)
add_custom_command(
  OUTPUT ${SCANGATE_PACKAGE_STAMP}
  COMMAND ${SCANGATE_DEB_DIR}/package_docs.sh ${PROJECT_SOURCE_DIR} ${SCANGATE_MAN_PAGE}
          ${CMAKE_BINARY_DIR}/package/copyright ${PROJECT_VERSION}-${SCANGATE_DEB_RELEASE} ${SCANGATE_PACKAGE_STAGING}
  COMMAND ${CMAKE_COMMAND} -E touch ${SCANGATE_PACKAGE_STAMP}
  DEPENDS ${SCANGATE_MAN_PAGE} ${CMAKE_BINARY_DIR}/package/copyright ${SCANGATE_DOC_PAGES}
          ${SCANGATE_DEB_DIR}/package_docs.sh ${SCANGATE_DEB_DIR}/changelog ${SCANGATE_DEB_DIR}/NEWS
          ${SCANGATE_DEB_DIR}/lintian-overrides ${SCANGATE_DEB_DIR}/examples/tokens
          ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/openapi.yaml ${PROJECT_SOURCE_DIR}/deploy/scangate.conf
          ${PROJECT_SOURCE_DIR}/deploy/haproxy.cfg ${PROJECT_SOURCE_DIR}/deploy/prometheus/scangate-rules.yml
          ${PROJECT_SOURCE_DIR}/deploy/grafana/scangate.json
  COMMENT "Laying out the package's documentation"
  VERBATIM)
add_custom_target(scangate_package_files DEPENDS ${SCANGATE_PACKAGE_STAMP})

# The binary binds every symbol at start (full RELRO: dpkg-buildflags' hardening=+bindnow; lintian
# hardening-no-bindnow). A link option only: the same objects as every other build.
target_link_options(scangate PRIVATE LINKER:-z,now)
install(TARGETS scangate RUNTIME DESTINATION bin COMPONENT scangate)
# As dh_strip does: without the compiler's .comment and .note sections (lintian binary-has-unneeded-section);
# CPACK_STRIP_FILES strips the symbols after this.
install(CODE "execute_process(COMMAND \"${CMAKE_OBJCOPY}\" --remove-section=.comment --remove-section=.note
                              \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/bin/scangate\" COMMAND_ERROR_IS_FATAL ANY)"
        COMPONENT scangate)
install(FILES ${SCANGATE_DEB_DIR}/scangate.service DESTINATION /lib/systemd/system COMPONENT scangate)
install(FILES ${SCANGATE_DEB_DIR}/scangate.conf DESTINATION /etc/scangate COMPONENT scangate)
install(FILES ${SCANGATE_DEB_DIR}/default.env DESTINATION /etc/default RENAME scangate
        PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT scangate)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sql/ DESTINATION share/scangate/sql COMPONENT scangate
        FILES_MATCHING PATTERN "*.sql")
install(DIRECTORY ${SCANGATE_PACKAGE_STAGING}/doc/ DESTINATION share/doc/scangate COMPONENT scangate)
install(DIRECTORY ${SCANGATE_PACKAGE_STAGING}/man/ DESTINATION share/man/man8 COMPONENT scangate)
install(DIRECTORY ${SCANGATE_PACKAGE_STAGING}/lintian/ DESTINATION share/lintian/overrides COMPONENT scangate)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME scangate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# The licence (LICENSE at the root: Apache-2.0). A .deb has no licence field: Debian states it in
# /usr/share/doc/scangate/copyright, whose "License: Apache-2.0" line is the SPDX identifier (copyright.in).
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # scangate_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE ${SCANGATE_DEB_RELEASE})  # deploy/debian/changelog names it
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${SCANGATE_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE ${SCANGATE_HOMEPAGE})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "scan-key de-duplication service: a Bloom filter in front of PostgreSQL")
# The extended description: lines under 80 characters (Debian policy 3.4.1; lintian).
set(CPACK_PACKAGE_DESCRIPTION "scangate answers whether a scan key has been seen before, over HTTP
(POST /observe): a Bloom filter answers most keys from memory, PostgreSQL is
the exact authority. Runs as the systemd unit scangate.service (Type=notify,
DynamicUser, state in /var/lib/scangate). Set the database URL in
/etc/default/scangate, then: systemctl enable --now scangate.
See README.Debian and scangate(8).")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends: from the binary's libraries (dpkg-shlibdeps)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${SCANGATE_DEB_DIR}/conffiles ${SCANGATE_DEB_DIR}/postinst ${SCANGATE_DEB_DIR}/prerm ${SCANGATE_DEB_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)  # maintainer scripts 0755, conffiles 0644
include(CPack)
