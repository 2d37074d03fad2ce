# The Debian package (CPack DEB): what `scripts/package.sh` builds into build/package/.
#   /usr/bin/scangate                      the binary (stripped)
#   /lib/systemd/system/scangate.service   the unit (deploy/debian/scangate.service)
#   /etc/scangate/scangate.conf            the configuration file (conffile)
#   /etc/default/scangate                  the unit's environment file, mode 0600 (conffile)
#   /usr/share/scangate/sql/               the migrations (the binary embeds and applies them; for reading);
#                                          sql/proxy/: the PL/Proxy database's functions (deploy/README.md)
#   /usr/share/doc/scangate/               README.md, openapi.yaml, copyright
# Depends are computed from the binary by dpkg-shlibdeps. Maintainer scripts: deploy/debian/{postinst,prerm,postrm}.
# Included from the top-level CMakeLists.txt (not with SCANGATE_CORE_ONLY).
set(SCANGATE_DEB_DIR ${PROJECT_SOURCE_DIR}/deploy/debian)

install(TARGETS scangate RUNTIME DESTINATION bin COMPONENT scangate)
install(FILES ${SCANGATE_DEB_DIR}/scangate.service DESTINATION /lib/systemd/system COMPONENT scangate)
install(FILES ${SCANGATE_DEB_DIR}/scangate.conf DESTINATION /etc/scangate COMPONENT scangate)
install(FILES ${SCANGATE_DEB_DIR}/default.env DESTINATION /etc/default RENAME scangate
        PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT scangate)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sql/ DESTINATION share/scangate/sql COMPONENT scangate
        FILES_MATCHING PATTERN "*.sql")
# copyright: scangate's, then that of dygraphs, which GET /dashboard embeds (server/CMakeLists.txt).
file(READ ${SCANGATE_DEB_DIR}/copyright.head SCANGATE_COPYRIGHT)
file(READ ${SCANGATE_DYGRAPHS_DIR}/../../doc/libjs-dygraphs/copyright SCANGATE_DYGRAPHS_COPYRIGHT)
file(WRITE ${CMAKE_BINARY_DIR}/package/copyright "${SCANGATE_COPYRIGHT}${SCANGATE_DYGRAPHS_COPYRIGHT}")
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/openapi.yaml ${CMAKE_BINARY_DIR}/package/copyright
        DESTINATION share/doc/scangate COMPONENT scangate)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME scangate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# The licence (LICENSE at the root: Apache-2.0). A .deb has no licence field: Debian states it in
# /usr/share/doc/scangate/copyright, whose "License: Apache-2.0" line is the SPDX identifier (copyright.head).
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # scangate_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "scangate maintainers <maintainers@users.noreply.a-seed-da1ea87f.example>")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "scan-key de-duplication service: a Bloom filter in front of PostgreSQL")
set(CPACK_PACKAGE_DESCRIPTION "scangate answers whether a scan key has been seen before, over HTTP (POST /observe):
a Bloom filter answers most keys from memory, PostgreSQL is the exact authority. Runs as the systemd unit
scangate.service (Type=notify, DynamicUser, state in /var/lib/scangate); configure the database URL in
/etc/default/scangate, then: systemctl enable --now scangate.")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends: from the binary's libraries (dpkg-shlibdeps)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${SCANGATE_DEB_DIR}/conffiles ${SCANGATE_DEB_DIR}/postinst ${SCANGATE_DEB_DIR}/prerm ${SCANGATE_DEB_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)  # maintainer scripts 0755, conffiles 0644
include(CPack)
