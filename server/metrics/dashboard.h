// The operator dashboard (GET /dashboard): one self-contained HTML page, embedded in the binary at build
// time by server/metrics/dashboard/embed_dashboard.cmake from server/metrics/dashboard/dashboard.html with dygraphs
// (Debian libjs-dygraphs, MIT) inlined. Invariant: the page needs nothing from the network but GET /stats
// from its own origin (the Content-Security-Policy below enforces it), and writes data into the DOM only
// as text (textContent / attributes), never as markup. Served like /metrics: no token; on the admin
// listener when --admin-listen is set.
#pragma once

#include <string_view>

namespace scangate::server {

// The page (generated source). Threading: immutable.
std::string_view DashboardHtml();

inline constexpr std::string_view kDashboardContentType = "text/html; charset=utf-8";
// Inline script and style only (the page is one file); fetch only to the same origin; no frames, forms,
// plugins or outside images.
inline constexpr std::string_view kDashboardCsp =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace scangate::server
