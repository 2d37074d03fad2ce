// A response as the bytes on the wire: status line, fields, blank line, body in one contiguous buffer (cleared,
// its capacity reused per session), written with one async_write of one buffer. Invariant: the same bytes Beast's
// http::async_write sends for a string_body response after prepare_payload() (Content-Length, never chunked).
// Why not Beast's serializer: it walked a buffers_cat_view of header and body pieces per write, ~3.5 % of
// scangate's CPU at 256 connections (issue 8's profile). Use: Session::Send.
#pragma once

#include <string>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace scangate::server {

// `res` (prepare_payload() done, HTTP/1.0 or 1.1) into `out`. `head`: the answer to a HEAD request — status line
// and fields only, Content-Length still the body's (what the GET would send: RFC 9110 §9.3.2), no body. Pure; any
// thread.
void SerializeResponse(const boost::beast::http::response<boost::beast::http::string_body>& res, std::string& out,
                       bool head = false);

}  // namespace scangate::server
