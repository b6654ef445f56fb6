// serve/client_connection.cpp — see serve/client_connection.h. The lookup reads /proc/self/fd and compares each
// socket's two ends with the request's, written the way httplib writes them (getnameinfo, numeric host); one
// established connection has one pair of ends. A hang-up is the peer's FIN or reset, asked of poll() without
// waiting, and confirmed for plain readable data by a one-byte peek that finds the end of the stream.
#include "graphed/serve/client_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

namespace graphed::serve {
namespace {

struct Endpoint {
  std::string address;
  int port = -1;
};

std::optional<Endpoint> endpoint_of(const sockaddr_storage& address, socklen_t length) {
  int port = -1;
  if (address.ss_family == AF_INET) port = ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  if (address.ss_family == AF_INET6) port = ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  if (port < 0) return std::nullopt;  // not a TCP/IP socket
  char host[NI_MAXHOST];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) != 0) {
    return std::nullopt;
  }
  return Endpoint{host, port};
}

/// Whether socket `descriptor` is the server's end of the request's connection.
bool has_the_ends_of(int descriptor, const httplib::Request& request) {
  sockaddr_storage local{}, peer{};
  socklen_t local_length = sizeof(local), peer_length = sizeof(peer);
  if (::getsockname(descriptor, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) return false;
  if (::getpeername(descriptor, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) return false;
  const auto ours = endpoint_of(local, local_length);
  const auto theirs = endpoint_of(peer, peer_length);
  return ours && theirs && ours->port == request.local_port && theirs->port == request.remote_port &&
         ours->address == request.local_addr && theirs->address == request.remote_addr;
}

}  // namespace

ClientConnection ClientConnection::of(const httplib::Request& request) {
  DIR* folder = ::opendir("/proc/self/fd");
  if (folder == nullptr) return ClientConnection(-1);
  int found = -1;
  while (const dirent* entry = ::readdir(folder)) {
    char* end = nullptr;
    const long descriptor = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || descriptor == ::dirfd(folder)) continue;
    if (has_the_ends_of(static_cast<int>(descriptor), request)) {
      found = static_cast<int>(descriptor);
      break;
    }
  }
  ::closedir(folder);
  return ClientConnection(found);
}

bool ClientConnection::client_left() const {
  if (socket_ < 0) return false;
  pollfd watch{socket_, POLLIN | POLLRDHUP, 0};
  if (::poll(&watch, 1, 0) <= 0) return false;
  if ((watch.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) return true;
  if ((watch.revents & POLLIN) == 0) return false;
  char byte = 0;
  const ssize_t read = ::recv(socket_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return read == 0 || (read < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace graphed::serve
