#include "server/http/response_wire.h"

namespace scangate::server {

void SerializeResponse(const boost::beast::http::response<boost::beast::http::string_body>& res, std::string& out,
                       bool head) {
  out.clear();
  out += res.version() == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  char code[3];
  const unsigned status = res.result_int();  // 100..999
  code[0] = static_cast<char>('0' + status / 100 % 10);
  code[1] = static_cast<char>('0' + status / 10 % 10);
  code[2] = static_cast<char>('0' + status % 10);
  out.append(code, sizeof code);
  out += ' ';
  out += res.reason();
  out += "\r\n";
  for (const auto& field : res) {
    out += field.name_string();
    out += ": ";
    out += field.value();
    out += "\r\n";
  }
  out += "\r\n";
  if (!head) out += res.body();
}

}  // namespace scangate::server
