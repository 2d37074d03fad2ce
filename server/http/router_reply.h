// Router::Reply: the one answer of a request, shared by every completion that may give it (the Service's, the
// lookup reader's, the handler's own exception path). Invariant: the session's callback runs at most once, whoever
// answers first, so an exception after a completion was handed on cannot answer twice. A copy is one shared_ptr:
// a completion holding only its Reply fits an absl::AnyInvocable inline, the Router and the CORS header travelling
// inside — flag, callback and header in one allocation per request (issue 44). Private to server/http/router.cc.
// Threading: answered on the request's I/O thread; copies may be made and dropped on any thread.
#pragma once

#include <memory>
#include <utility>

#include <boost/beast/http/field.hpp>

#include "server/http/router.h"

namespace scangate::server {

class Router::Reply {
 public:
  Reply(const Router& router, Respond done) : s_(std::make_shared<State>(router, std::move(done))) {}
  void operator()(Answer a) const {
    if (s_->answered) return;
    s_->answered = true;
    s_->done(std::move(a));
  }
  const Router& router() const { return s_->router; }
  // The request header a later answer needs for its CORS headers: null without an Origin (AddCors adds nothing).
  const Header* header() const { return s_->header.get(); }
  // Keeps it — a copy only when the request has an Origin (a browser): copying every header of every terminal
  // request was the largest allocation of /observe (issue 8's profile: ~20 % of malloc time). Call before handing
  // a completion on, on the request's thread.
  void KeepCorsHeader(const Request& req) const {
    if (req.find(boost::beast::http::field::origin) == req.end()) return;
    s_->header = std::make_shared<const Header>(req.base());
  }

 private:
  struct State {
    State(const Router& r, Respond d) : router(r), done(std::move(d)) {}
    const Router& router;
    bool answered = false;
    Respond done;
    std::shared_ptr<const Header> header;
  };
  std::shared_ptr<State> s_;
};

}  // namespace scangate::server
