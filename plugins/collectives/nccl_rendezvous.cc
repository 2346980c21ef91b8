#include "nccl_rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <thread>
#include <utility>

#include "trainyard/error.h"

namespace trainyard::collectives {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kMagic[4] = {'T', 'Y', 'N', 'R'};
constexpr std::size_t kHelloSize = 12;
enum Status : uint8_t {
  kAccepted = 0,
  kWorldSizeDiffers = 1,
  kDuplicateRank = 2,
  kRankOutOfRange = 3,
  kAnotherRankRefused = 4,
};

const char* status_text(uint8_t status) {
  switch (status) {
    case kWorldSizeDiffers:
      return "rank 0 was started with another world size";
    case kDuplicateRank:
      return "another process already connected as this rank";
    case kRankOutOfRange:
      return "the rank is out of range for rank 0's world size";
    case kAnotherRankRefused:
      return "rank 0 refused another rank and gave up the rendezvous";
    default:
      return "unknown status";
  }
}

// A socket closed when it goes out of scope.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// Milliseconds left until `deadline` for poll(): 0 once it has passed.
int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

std::string peer_name(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "(unknown peer)";
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "(unknown peer)";
  }
  std::string name = host;
  // An IPv4 peer of the dual-stack socket, as it is usually written.
  if (name.rfind("::ffff:", 0) == 0 && name.find('.') != std::string::npos) name = name.substr(7);
  return name + ":" + port;
}

// Sends all of `data` on non-blocking `fd` before `deadline`; false (with `error`) otherwise.
bool send_all(int fd, const void* data, std::size_t size, Clock::time_point deadline,
              std::string& error) {
  const auto* p = static_cast<const std::byte*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      error = errno_text("send");
      return false;
    }
    pollfd pfd{fd, POLLOUT, 0};
    if (::poll(&pfd, 1, ms_until(deadline)) == 0) {
      error = "send timed out";
      return false;
    }
  }
  return true;
}

std::string world_text(int rank, int world_size) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world_size);
}

}  // namespace

RendezvousAddress parse_rendezvous_address(std::string_view text) {
  const std::string given(text);
  auto bad = [&](const std::string& why) {
    return InvalidArgument("NcclCollective rendezvous address '" + given + "': " + why +
                           " (expected host:port, e.g. node0:29500 or [::1]:29500)");
  };
  RendezvousAddress a;
  a.text = given;
  std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) throw bad("no port");
  std::string_view host = text.substr(0, colon);
  std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    throw bad("an IPv6 address must be written in brackets");
  }
  if (host.empty()) throw bad("no host");
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(std::string(port)) > 65535) {
    throw bad("the port must be a number from 0 to 65535");
  }
  a.host = std::string(host);
  a.port = std::string(port);
  return a;
}

RendezvousServer::RendezvousServer(RendezvousAddress address) : address_(std::move(address)) {
  // Every interface: the host part names this machine for the other ranks, and a host name
  // often resolves to a loopback address locally (127.0.1.1 on Debian).
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(nullptr, address_.port.c_str(), &hints, &found);
  if (rc != 0) {
    throw Error("NcclCollective rendezvous: rank 0 cannot listen on port " + address_.port +
                " of " + address_.text + ": " + gai_strerror(rc));
  }
  // IPv6 first (dual-stack, it takes IPv4 connections too), then IPv4.
  std::vector<addrinfo*> candidates;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) candidates.push_back(ai);
  std::stable_partition(candidates.begin(), candidates.end(),
                        [](addrinfo* ai) { return ai->ai_family == AF_INET6; });
  std::string last_error = "no address to listen on";
  for (addrinfo* ai : candidates) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (fd.get() < 0) {
      last_error = errno_text("socket");
      continue;
    }
    int one = 1;
    int zero = 0;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ai->ai_family == AF_INET6) {
      setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = errno_text("bind");
      continue;
    }
    if (::listen(fd.get(), 1024) != 0) {
      last_error = errno_text("listen");
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    listen_fd_ = fd.release();
    break;
  }
  freeaddrinfo(found);
  if (listen_fd_ >= 0 && address_.port == "0") {
    address_.port = std::to_string(port_);
    address_.text = address_.text.substr(0, address_.text.rfind(':') + 1) + address_.port;
  }
  if (listen_fd_ < 0) {
    throw Error("NcclCollective rendezvous: rank 0 cannot listen on port " + address_.port +
                " of " + address_.text + " (" + last_error + ")");
  }
}

RendezvousServer::~RendezvousServer() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void RendezvousServer::serve(std::span<const std::byte> id, int world_size,
                             Clock::time_point deadline) {
  const auto started = Clock::now();
  struct Pending {
    Fd fd;
    std::string peer;
    std::size_t have = 0;
    unsigned char hello[kHelloSize] = {};
  };
  std::vector<Pending> pending;
  std::map<int, Fd> arrived;  // rank -> its connection

  // Tells every rank connected so far that the rendezvous failed, then throws `why`.
  auto refuse = [&](int bad_fd, uint8_t bad_status, const std::string& why) {
    const auto grace = Clock::now() + std::chrono::seconds(1);
    std::string ignored;
    uint8_t status = bad_status;
    send_all(bad_fd, &status, 1, grace, ignored);
    status = kAnotherRankRefused;
    for (auto& [rank, fd] : arrived) send_all(fd.get(), &status, 1, grace, ignored);
    throw Error("NcclCollective rendezvous: rank 0 at " + address_.text + ": " + why);
  };

  while (static_cast<int>(arrived.size()) < world_size - 1) {
    if (Clock::now() >= deadline) {
      std::string missing;
      int listed = 0;
      for (int r = 1; r < world_size; ++r) {
        if (arrived.count(r) != 0) continue;
        if (listed == 16) {
          missing += ", ...";
          break;
        }
        missing += (listed++ == 0 ? "" : ", ") + std::to_string(r);
      }
      auto secs = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started);
      throw Error("NcclCollective rendezvous: rank 0 listening at " + address_.text +
                  " heard from " + std::to_string(arrived.size()) + " of " +
                  std::to_string(world_size - 1) + " other ranks within " +
                  std::to_string(secs.count()) + " s; missing rank(s) " + missing +
                  " (not started, started with another rendezvous address, or unable "
                  "to reach this host)");
    }
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const Pending& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    int ready = ::poll(fds.data(), fds.size(), std::min(ms_until(deadline), 1000));
    if (ready < 0 && errno != EINTR)
      throw Error("NcclCollective rendezvous: " + errno_text("poll"));
    if (ready <= 0) continue;
    // Read hellos first (their indices match `fds`), then accept new connections.
    std::vector<Pending> still;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      Pending& p = pending[i];
      if (fds[i + 1].revents == 0) {
        still.push_back(std::move(p));
        continue;
      }
      ssize_t n = ::recv(p.fd.get(), p.hello + p.have, kHelloSize - p.have, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        still.push_back(std::move(p));
        continue;
      }
      if (n <= 0) continue;  // closed before saying who it is: dropped
      p.have += static_cast<std::size_t>(n);
      if (p.have < kHelloSize) {
        still.push_back(std::move(p));
        continue;
      }
      if (std::memcmp(p.hello, kMagic, sizeof(kMagic)) != 0) continue;  // not a rank: dropped
      uint32_t rank_be = 0;
      uint32_t world_be = 0;
      std::memcpy(&rank_be, p.hello + 4, 4);
      std::memcpy(&world_be, p.hello + 8, 4);
      const int64_t rank = ntohl(rank_be);
      const int64_t world = ntohl(world_be);
      const std::string who = "rank " + std::to_string(rank) + " (from " + p.peer + ")";
      if (world != world_size) {
        refuse(p.fd.get(), kWorldSizeDiffers,
               who + " was started with world size " + std::to_string(world) + ", rank 0 with " +
                   std::to_string(world_size));
      }
      if (rank < 1 || rank >= world_size) {
        refuse(p.fd.get(), kRankOutOfRange,
               who + " is out of range for a world of " + std::to_string(world_size));
      }
      if (arrived.count(static_cast<int>(rank)) != 0) {
        refuse(p.fd.get(), kDuplicateRank, who + " connected twice (two processes with one rank)");
      }
      arrived.emplace(static_cast<int>(rank), std::move(p.fd));
    }
    pending = std::move(still);
    if (fds[0].revents != 0) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        Pending p;
        p.fd = Fd(fd);
        p.peer = peer_name(fd);
        pending.push_back(std::move(p));
      }
    }
  }
  // Everyone is here: hand out the id.
  std::vector<std::byte> message(1 + id.size());
  message[0] = std::byte{kAccepted};
  std::copy(id.begin(), id.end(), message.begin() + 1);
  const auto send_deadline = std::max(deadline, Clock::now() + std::chrono::seconds(10));
  for (auto& [rank, fd] : arrived) {
    std::string error;
    if (!send_all(fd.get(), message.data(), message.size(), send_deadline, error)) {
      throw Error("NcclCollective rendezvous: rank 0 at " + address_.text +
                  " could not send the unique id to rank " + std::to_string(rank) + ": " + error);
    }
  }
}

std::vector<std::byte> fetch_rendezvous_id(const RendezvousAddress& address, int rank,
                                           int world_size, std::size_t id_size,
                                           Clock::time_point deadline) {
  const auto started = Clock::now();
  unsigned char hello[kHelloSize];
  std::memcpy(hello, kMagic, sizeof(kMagic));
  const uint32_t rank_be = htonl(static_cast<uint32_t>(rank));
  const uint32_t world_be = htonl(static_cast<uint32_t>(world_size));
  std::memcpy(hello + 4, &rank_be, 4);
  std::memcpy(hello + 8, &world_be, 4);

  std::string last_error = "no attempt finished";
  auto backoff = std::chrono::milliseconds(50);
  while (Clock::now() < deadline) {
    // Resolved on every try: the name may appear only once rank 0's host is up.
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(address.host.c_str(), address.port.c_str(), &hints, &found);
    Fd fd;
    if (rc != 0) {
      last_error = std::string("resolving ") + address.host + ": " + gai_strerror(rc);
    } else {
      for (addrinfo* ai = found; ai != nullptr && fd.get() < 0; ai = ai->ai_next) {
        Fd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                      ai->ai_protocol));
        if (s.get() < 0) {
          last_error = errno_text("socket");
          continue;
        }
        if (::connect(s.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
          if (errno != EINPROGRESS) {
            last_error = errno_text("connect");
            continue;
          }
          pollfd pfd{s.get(), POLLOUT, 0};
          if (::poll(&pfd, 1, ms_until(deadline)) <= 0) {
            last_error = "connect timed out";
            continue;
          }
          int so_error = 0;
          socklen_t len = sizeof(so_error);
          getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
          if (so_error != 0) {
            last_error = std::string("connect: ") + std::strerror(so_error);
            continue;
          }
        }
        fd = std::move(s);
      }
      freeaddrinfo(found);
    }
    if (fd.get() >= 0) {
      std::string error;
      std::vector<std::byte> reply(1 + id_size);
      std::size_t have = 0;
      if (!send_all(fd.get(), hello, sizeof(hello), deadline, error)) {
        last_error = error;
      } else {
        // Rank 0 answers once every rank has arrived: this waits for the slowest rank.
        while (have < reply.size()) {
          pollfd pfd{fd.get(), POLLIN, 0};
          if (::poll(&pfd, 1, ms_until(deadline)) <= 0) break;
          ssize_t n = ::recv(fd.get(), reply.data() + have, reply.size() - have, 0);
          if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
          if (n <= 0) break;
          have += static_cast<std::size_t>(n);
          if (reply[0] != std::byte{kAccepted}) {
            throw Error("NcclCollective rendezvous: rank 0 at " + address.text + " refused " +
                        world_text(rank, world_size) + ": " +
                        status_text(static_cast<uint8_t>(reply[0])));
          }
        }
        if (have == reply.size()) return std::vector<std::byte>(reply.begin() + 1, reply.end());
        last_error = have == 0 && Clock::now() < deadline
                         ? "rank 0 closed the connection without an answer"
                         : "connected, but rank 0 sent no unique id (it waits until every rank "
                           "has connected)";
      }
    }
    auto pause = std::min<Clock::duration>(backoff, deadline - Clock::now());
    if (pause > Clock::duration::zero()) std::this_thread::sleep_for(pause);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started);
  throw Error("NcclCollective rendezvous: " + world_text(rank, world_size) +
              " got no unique id from rank 0 at " + address.text + " within " +
              std::to_string(secs.count()) + " s (last error: " + last_error + ")");
}

}  // namespace trainyard::collectives
