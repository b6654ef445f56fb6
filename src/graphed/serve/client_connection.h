// serve/client_connection.h — the socket a request came in on, found from the request's addresses, and asked
// whether its client has gone away, without writing to it: a whole (not streamed) answer waits in its handler
// with its status unsent, and still notices a client that hangs up. cpp-httplib 0.11 gives a handler no way to
// its socket, so the connection is looked up among the process's sockets by its two ends.
#pragma once

#include <httplib.h>

namespace graphed::serve {

class ClientConnection {
 public:
  /// The connection `request` came on; one that cannot be found (never expected) reports no hang-up.
  static ClientConnection of(const httplib::Request& request);

  /// Whether the client closed its end or the connection failed. Data waiting on it (a pipelined request) is
  /// not a hang-up.
  bool client_left() const;
  bool found() const { return socket_ >= 0; }

 private:
  explicit ClientConnection(int socket) : socket_(socket) {}
  int socket_ = -1;  // not owned: httplib closes it after the handler returns
};

}  // namespace graphed::serve
