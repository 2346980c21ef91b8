// The TCP rendezvous through which the ranks of an NCCL job obtain rank 0's unique id
// (ncclUniqueId, 128 bytes) when no MPI launcher carries it.
//
// Rank 0 listens on the port of a "host:port" address (on every interface: the host part is
// where the other ranks reach it) and waits for every other rank to connect and say which rank
// it is and the world size it was started with; only when all have arrived, with consistent
// ranks, does it send each of them the id. The other ranks connect, retrying while rank 0 is not
// yet listening, and read the id. Every step is bounded by one deadline; an error names the
// address, this rank and, on rank 0, the ranks that never arrived. A connection that does not
// speak this protocol (a port scanner) is dropped and the wait goes on.
//
// Wire format (all integers big-endian): a rank sends "TYNR", its rank (u32) and world size
// (u32); rank 0 answers one status byte (0: accepted, then the id) and closes.
#ifndef TRAINYARD_PLUGINS_COLLECTIVES_NCCL_RENDEZVOUS_H_
#define TRAINYARD_PLUGINS_COLLECTIVES_NCCL_RENDEZVOUS_H_

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trainyard::collectives {

struct RendezvousAddress {
  std::string host;  // a name or an address; IPv6 literals are written in brackets: [::1]:29500
  std::string port;  // a number
  std::string text;  // as given, for errors
};

// Parses "host:port". Throws InvalidArgument naming `text` and what is wrong with it.
RendezvousAddress parse_rendezvous_address(std::string_view text);

// Rank 0's side. The constructor listens (port 0: a free port, see port()); throws Error naming
// the address when the port cannot be bound.
class RendezvousServer {
 public:
  explicit RendezvousServer(RendezvousAddress address);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // The port listened on.
  int port() const { return port_; }

  // Waits until ranks 1..world_size-1 have each connected once, then sends each `id` and
  // returns. Throws Error when the deadline passes first (naming the ranks still missing), or
  // when a rank reports another world size or a rank already seen or out of range; every rank
  // connected so far is then told it was refused.
  void serve(std::span<const std::byte> id, int world_size,
             std::chrono::steady_clock::time_point deadline);

 private:
  RendezvousAddress address_;
  int listen_fd_ = -1;
  int port_ = 0;
};

// Another rank's side: connects to rank 0 at `address` (retrying until `deadline` while nothing
// listens there) and returns the `id_size` bytes of the id. Throws Error naming the address,
// `rank` and the last cause when the deadline passes or rank 0 refuses this rank.
std::vector<std::byte> fetch_rendezvous_id(const RendezvousAddress& address, int rank,
                                           int world_size, std::size_t id_size,
                                           std::chrono::steady_clock::time_point deadline);

}  // namespace trainyard::collectives

#endif  // TRAINYARD_PLUGINS_COLLECTIVES_NCCL_RENDEZVOUS_H_
