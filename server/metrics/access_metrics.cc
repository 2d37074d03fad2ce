#include "server/metrics/access_metrics.h"

#include <string>

namespace scangate::server {

void WriteAccessMetrics(PromWriter& w, const MetricsSnapshot& s) {
  w.Single("scangate_body_bytes_in_flight", "gauge",
           "Request body bytes held now by all connections (declared sizes, from the header on).",
           s.body_bytes_in_flight);
  w.Single("scangate_body_bytes_limit", "gauge", "--max-body-bytes-in-flight (0: no limit).", s.body_bytes_limit);
  w.Single("scangate_body_budget_refused_total", "counter",
           "Requests answered 503 before their body was read: --max-body-bytes-in-flight was held by others.",
           s.body_budget_refused);
  w.Header("scangate_connections_refused_total", "counter",
           "Connections closed at accept, unanswered: past --max-connections-per-address or "
           "--admin-max-connections-per-address (per_address) or past the listener's connection cap (full).");
  w.Sample("scangate_connections_refused_total", "reason=\"per_address\"", s.refused_per_address);
  w.Sample("scangate_connections_refused_total", "reason=\"full\"", s.refused_full);
  w.Single("scangate_tls_client_certificate_refused_total", "counter",
           "TLS handshakes failed for the client certificate (--tls-client-ca): none sent, not issued by those CAs, "
           "expired, or revoked (--tls-crl).",
           s.client_certificates_refused);
  w.Single("scangate_auth_failures_limited_total", "counter",
           "Requests answered 429 because their address failed authentication too often (token guessing).",
           s.auth_failures_limited);
  if (!s.rate_limit) return;
  const RateLimitStats& r = *s.rate_limit;
  w.Header("scangate_rate_limited_total", "counter",
           "Requests refused 429 by the rate limit (--rate-limit), by terminal (the tokens file's ids; "
           "\"(address)\": all client addresses together when tokens are off).");
  for (const auto& [label, n] : r.limited) w.Sample("scangate_rate_limited_total", "terminal=\"" + label + "\"", n);
  w.Header("scangate_rate_limit_buckets", "gauge", "Rate-limit buckets held now (terminals or client addresses).");
  w.Sample("scangate_rate_limit_buckets", "", r.buckets);
  w.Header("scangate_rate_limit_evictions_total", "counter",
           "Rate-limit buckets dropped before they had refilled, to keep memory bounded (many client addresses).");
  w.Sample("scangate_rate_limit_evictions_total", "", r.evictions);
}

void AddAccessStats(boost::json::object& o, const MetricsSnapshot& s) {
  o["body_budget"] = boost::json::object{{"in_flight_bytes", s.body_bytes_in_flight},
                                         {"limit_bytes", s.body_bytes_limit},
                                         {"refused", s.body_budget_refused}};
  o["refused"] = boost::json::object{{"connections_per_address", s.refused_per_address},
                                     {"connections_full", s.refused_full},
                                     {"client_certificates", s.client_certificates_refused},
                                     {"auth_failures_limited", s.auth_failures_limited}};
  if (!s.rate_limit) return;
  const RateLimitStats& r = *s.rate_limit;
  boost::json::object limited;
  for (const auto& [label, n] : r.limited) limited[label] = n;
  o["rate_limit"] = boost::json::object{{"per_second", s.rate_limit_per_second},
                                        {"burst", s.rate_limit_burst},
                                        {"buckets", r.buckets},
                                        {"evictions", r.evictions},
                                        {"limited", std::move(limited)}};
}

}  // namespace scangate::server
