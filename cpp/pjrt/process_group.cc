#include "pjrt/process_group.h"

#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

#include "support/byte_stream.h"

namespace jmp::pjrt {

namespace {

// MPICH's mpiexec (hydra) tells the job's other processes that one has ended with SIGUSR1, and MPICH's
// handler for it ends them too. The group takes the signal instead, so that a survivor finds the
// missing process itself and reports it as an error, within JAX_METAL_PEER_TIMEOUT.
volatile std::sig_atomic_t job_notice = 0;

extern "C" void OnJobNotice(int) { job_notice = 1; }

void TakeJobNotices() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = &OnJobNotice;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
}

// The tag of all-reduce messages: above every run's tag (Exchange), so the two never match.
constexpr int kCollectiveTag = 32001;

std::string Key(int process) { return "jax_metal/process/" + std::to_string(process); }

std::string Seconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

}  // namespace

StatusOr<double> ProcessGroup::Timeout() {
  const char* env = std::getenv("JAX_METAL_PEER_TIMEOUT");
  if (!env || !*env) return 300.0;
  char* end = nullptr;
  const double s = std::strtod(env, &end);
  if (*end || !(s > 0))
    return InvalidArgument("JAX_METAL_PEER_TIMEOUT='" + std::string(env) + "': expected a number of seconds above 0");
  return s;
}

StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Join(int process, int count, int local_devices,
                                                           const KeyValueStore& store) {
  if (count < 2 || process < 0 || process >= count)
    return InvalidArgument("process " + std::to_string(process) + " of " + std::to_string(count));
  if (!store.put || !store.get)
    return FailedPrecondition("JAX gave the metal plugin no key-value store for a program over " +
                              std::to_string(count) + " processes");
  std::unique_ptr<ProcessGroup> group(new ProcessGroup);
  JMP_ASSIGN_OR_RETURN(group->timeout_s_, Timeout());
  JMP_ASSIGN_OR_RETURN(group->mpi_, MpiLibrary::Get());
  TakeJobNotices();
  MpiLibrary& mpi = *group->mpi_;
  if (mpi.size() != count)
    return FailedPrecondition("JAX runs " + std::to_string(count) + " processes, but MPI (" + mpi.path() + ") has " +
                              std::to_string(mpi.size()) + ": start every process with the same mpiexec (mpiexec -n " +
                              std::to_string(count) + " python script.py)");
  group->process_ = process;
  JMP_RETURN_IF_ERROR(store.put(Key(process), std::to_string(local_devices) + " " + std::to_string(mpi.rank())));
  group->devices_.assign(static_cast<size_t>(count), 0);
  group->gone_.assign(static_cast<size_t>(count), "");
  group->ranks_.assign(static_cast<size_t>(count), -1);
  const int timeout_ms = static_cast<int>(group->timeout_s_ * 1000);
  for (int p = 0; p < count; ++p) {
    StatusOr<std::string> value = store.get(Key(p), timeout_ms);
    if (!value.ok())
      return Status(value.status().code(), "process " + std::to_string(p) + " of " + std::to_string(count) +
                                               " did not announce its metal devices within " +
                                               Seconds(group->timeout_s_) +
                                               " s (JAX_METAL_PEER_TIMEOUT): " + value.status().message());
    std::istringstream in(*value);
    int devices = 0, rank = -1;
    if (!(in >> devices >> rank) || devices < 1 || rank < 0 || rank >= count)
      return Internal("process " + std::to_string(p) + " announced '" + *value + "', not its devices and MPI rank");
    for (int q = 0; q < p; ++q)
      if (group->ranks_[static_cast<size_t>(q)] == rank)
        return FailedPrecondition("processes " + std::to_string(q) + " and " + std::to_string(p) +
                                  " have the same MPI rank: they were not started by one mpiexec");
    group->devices_[static_cast<size_t>(p)] = devices;
    group->ranks_[static_cast<size_t>(p)] = rank;
  }
  ProcessGroup* joined = group.get();
  exec::SetProcessReducer([joined](const exec::ProcessReduce& reduce) { return joined->AllReduce(reduce); });
  return group;
}

ProcessGroup::~ProcessGroup() {
  if (mpi_) exec::SetProcessReducer(nullptr);
}

Status ProcessGroup::AllReduce(const exec::ProcessReduce& r) {
  const std::string what = "an all-reduce across processes";
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.ok())
    return FailedPrecondition("the processes cannot run programs together any more: " + broken_.message());
  std::vector<int> takers(r.processes.begin(), r.processes.end());
  std::sort(takers.begin(), takers.end());
  takers.erase(std::unique(takers.begin(), takers.end()), takers.end());
  const auto me = std::find(takers.begin(), takers.end(), process_);
  size_t mine = 0;
  for (int p : r.processes) mine += p == process_;
  if (me == takers.end() || mine != r.operands.size() || r.element_bytes == 0)
    return Internal(what + ": this process's members and operands differ");
  for (int p : takers)
    if (p < 0 || p >= count()) return Internal(what + " with process " + std::to_string(p));
  // Process q's share: elements [begin(q), begin(q + 1)) of the takers' order.
  const size_t n = takers.size();
  auto begin = [&](size_t q) { return static_cast<size_t>(r.elements) * q / n; };
  auto share = [&](size_t q) { return (begin(q + 1) - begin(q)) * r.element_bytes; };
  const size_t self = static_cast<size_t>(me - takers.begin());
  const size_t my_bytes = share(self), my_offset = begin(self) * r.element_bytes;

  // Each member's piece of this process's share: an operand here, or a staging slot for the others'.
  std::vector<const uint8_t*> piece(r.processes.size(), nullptr);
  size_t remote = 0;
  for (int p : r.processes) remote += p != process_;
  auto staging = std::make_shared<std::vector<uint8_t>>(remote * my_bytes);
  std::vector<jmp::pjrt::Transfer> sends, receives;
  for (size_t t = 0; t < n; ++t) {
    const int q = takers[t];
    if (q == process_) continue;
    size_t local = 0;
    for (int p : r.processes)
      if (p == process_)
        sends.push_back({q, const_cast<uint8_t*>(r.operands[local++]) + begin(t) * r.element_bytes, share(t)});
  }
  for (size_t k = 0, local = 0, slot = 0; k < r.processes.size(); ++k) {
    if (r.processes[k] == process_) {
      piece[k] = r.operands[local++] + my_offset;
      continue;
    }
    piece[k] = staging->data() + slot * my_bytes;
    ++slot;
  }
  // Receives listed process by process, each process's members in group order, as it sends them.
  for (int q : takers) {
    if (q == process_) continue;
    for (size_t k = 0; k < r.processes.size(); ++k)
      if (r.processes[k] == q) receives.push_back({q, const_cast<uint8_t*>(piece[k]), my_bytes});
  }
  std::vector<std::shared_ptr<void>> keep{staging};
  JMP_RETURN_IF_ERROR(Transfer(what, kCollectiveTag, sends, receives, keep));

  uint8_t* acc = r.out + my_offset;
  if (my_bytes) std::memcpy(acc, piece[0], my_bytes);
  const int64_t my_elements = static_cast<int64_t>(my_bytes / r.element_bytes);
  for (size_t k = 1; k < piece.size(); ++k) JMP_RETURN_IF_ERROR(r.combine(acc, piece[k], my_elements));

  sends.clear();
  receives.clear();
  for (size_t t = 0; t < n; ++t) {
    const int q = takers[t];
    if (q == process_) continue;
    sends.push_back({q, acc, my_bytes});
    receives.push_back({q, r.out + begin(t) * r.element_bytes, share(t)});
  }
  return Transfer(what, kCollectiveTag, sends, receives, keep);
}

void ProcessGroup::SetGone(int process, const std::string& why) {
  std::lock_guard<std::mutex> lock(gone_mu_);
  if (process >= 0 && process < count()) gone_[static_cast<size_t>(process)] = why.empty() ? "gone" : why;
}

Status ProcessGroup::Exchange(const std::string& fingerprint, const std::string& what,
                              const std::vector<int>& participants, const std::vector<jmp::pjrt::Transfer>& sends,
                              const std::vector<jmp::pjrt::Transfer>& receives,
                              std::vector<std::shared_ptr<void>> keep) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.ok())
    return FailedPrecondition("the processes cannot run programs together any more: " + broken_.message());
  const uint64_t run = ++runs_[participants];
  const int tag = static_cast<int>(run % 32000);
  // First every process states which program it runs as which run: nothing else moves unless all agree.
  struct Header {
    uint64_t program, run;
  };
  const Header mine{Fnv1a(fingerprint), run};  // FNV-1a: the same in every process
  auto theirs = std::make_shared<std::vector<Header>>(static_cast<size_t>(count()));
  // The header outlives a failed exchange, as MPI may still read it.
  auto header = std::make_shared<Header>(mine);
  std::vector<jmp::pjrt::Transfer> header_sends, header_receives;
  for (int p : participants) {
    if (p == process_) continue;
    header_sends.push_back({p, header.get(), sizeof(Header)});
    header_receives.push_back({p, &(*theirs)[static_cast<size_t>(p)], sizeof(Header)});
  }
  std::vector<std::shared_ptr<void>> header_keep{theirs, header};
  JMP_RETURN_IF_ERROR(Transfer(what + " (agreeing on the program)", tag, header_sends, header_receives, header_keep));
  for (int p : participants) {
    if (p == process_) continue;
    const Header& h = (*theirs)[static_cast<size_t>(p)];
    if (h.program != mine.program)
      return FailedPrecondition("process " + std::to_string(p) + " runs a different program than process " +
                                std::to_string(process_) + " (" + what +
                                "): every process must run the same jitted programs in the same order");
    if (h.run != mine.run)
      return FailedPrecondition("process " + std::to_string(p) + " is at its run " + std::to_string(h.run) +
                                " of programs over several processes, process " + std::to_string(process_) +
                                " at its run " + std::to_string(run) + " (" + what + ")");
  }
  return Transfer(what, tag, sends, receives, keep);
}

Status ProcessGroup::Transfer(const std::string& what, int tag, const std::vector<jmp::pjrt::Transfer>& sends,
                              const std::vector<jmp::pjrt::Transfer>& receives,
                              std::vector<std::shared_ptr<void>>& keep) {
  struct Pending {
    MpiLibrary::Request request;
    int process;
    bool receive;
  };
  std::vector<Pending> pending;
  Status failed;
  // Receives first, so a peer's sends find them posted; large transfers go as several messages.
  auto post = [&](const jmp::pjrt::Transfer& t, bool receive) -> Status {
    if (t.process < 0 || t.process >= count() || t.process == process_)
      return Internal("a transfer with process " + std::to_string(t.process));
    const int peer = ranks_[static_cast<size_t>(t.process)];
    for (size_t at = 0; at < t.bytes || (at == 0 && t.bytes == 0); at += MpiLibrary::kMaxMessage) {
      const size_t bytes = std::min(MpiLibrary::kMaxMessage, t.bytes - at);
      Pending p{0, t.process, receive};
      uint8_t* data = static_cast<uint8_t*>(t.data) + at;
      JMP_RETURN_IF_ERROR(receive ? mpi_->Irecv(data, bytes, peer, tag, &p.request)
                                  : mpi_->Isend(data, bytes, peer, tag, &p.request));
      pending.push_back(p);
      if (t.bytes == 0) break;
    }
    return Status::Ok();
  };
  for (const auto& t : receives)
    if (failed.ok()) failed = post(t, true);
  for (const auto& t : sends)
    if (failed.ok()) failed = post(t, false);

  const auto patience = std::chrono::duration<double>(timeout_s_);
  size_t left = pending.size();
  std::vector<bool> done(pending.size(), false);
  // MPI moves a large message only while it is being tested (as a blocking MPI call spins), so the
  // loop spins while data moves; after a while without progress (a peer still compiling, or gone) it
  // sleeps between tests instead of holding a core.
  auto progressed = std::chrono::steady_clock::now();
  for (int round = 0; failed.ok() && left > 0; ++round) {
    const size_t left_before = left;
    for (size_t k = 0; k < pending.size() && failed.ok(); ++k) {
      if (done[k]) continue;
      StatusOr<bool> finished = mpi_->Test(&pending[k].request);
      if (!finished.ok())
        failed = Status(finished.status().code(),
                        "with process " + std::to_string(pending[k].process) + ": " + finished.status().message());
      else if (*finished)
        done[k] = true, --left;
    }
    if (!failed.ok() || left == 0) break;
    if (round % 64 == 0) {
      std::lock_guard<std::mutex> lock(gone_mu_);
      for (size_t k = 0; k < pending.size() && failed.ok(); ++k) {
        const std::string& why = gone_[static_cast<size_t>(pending[k].process)];
        if (!done[k] && !why.empty())
          failed =
              Unavailable("process " + std::to_string(pending[k].process) + " is gone (" + why + ") during " + what);
      }
      if (!failed.ok()) break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (left != left_before) progressed = now;
    if (now - progressed > patience) {
      std::vector<bool> missing(static_cast<size_t>(count()), false);
      for (size_t k = 0; k < pending.size(); ++k)
        if (!done[k]) missing[static_cast<size_t>(pending[k].process)] = true;
      std::string names;
      for (int p = 0; p < count(); ++p)
        if (missing[static_cast<size_t>(p)]) names += (names.empty() ? "" : ", ") + std::to_string(p);
      failed = Unavailable("process " + names + " did not take part in " + what + ": nothing came for " +
                           Seconds(timeout_s_) + " s (JAX_METAL_PEER_TIMEOUT); " +
                           (job_notice ? "mpiexec reported that a process of the job ended"
                                       : "it ended, hangs, or runs other programs"));
      break;
    }
    if (now - progressed > std::chrono::milliseconds(200)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (failed.ok()) return Status::Ok();
  for (size_t k = 0; k < pending.size(); ++k)
    if (!done[k]) mpi_->Abandon(&pending[k].request, pending[k].receive);
  for (auto& k : keep) abandoned_.push_back(std::move(k));
  broken_ = failed;
  return failed;
}

}  // namespace jmp::pjrt
