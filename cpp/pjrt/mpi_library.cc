#include "pjrt/mpi_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

namespace jmp::pjrt {

namespace {

constexpr int kThreadSerialized = 2;  // MPI_THREAD_SERIALIZED in both ABIs
constexpr int kSuccess = 0;
constexpr int kErrorText = 1024;  // above MPI_MAX_ERROR_STRING in both ABIs (512, 256)

#ifdef __APPLE__
const char* const kLibraryNames[] = {"libmpi.12.dylib", "libmpi.40.dylib", "libmpi.dylib"};
#else
const char* const kLibraryNames[] = {"libmpi.so.12", "libmpi.so.40", "libmpi.so"};
#endif

// What differs between the ABIs: the type of a handle, and where the predefined ones come from.
// MPICH: ints with fixed values (its mpi.h); MPI_STATUS_IGNORE is (MPI_Status*)1.
struct Mpich {
  using Handle = int;
  static constexpr const char* kName = "MPICH";
  Handle comm_world = 0x44000000, byte = 0x4c00010d, errors_return = 0x54000001, request_null = 0x2c000000;
  void* status_ignore = reinterpret_cast<void*>(1);
  Status Resolve(void*, const std::string&) { return Status::Ok(); }
};

// Open MPI: pointers to the library's predefined objects (its mpi.h's OMPI_PREDEFINED_GLOBAL);
// MPI_STATUS_IGNORE is null.
struct OpenMpi {
  using Handle = void*;
  static constexpr const char* kName = "Open MPI";
  Handle comm_world = nullptr, byte = nullptr, errors_return = nullptr, request_null = nullptr;
  void* status_ignore = nullptr;
  Status Resolve(void* library, const std::string& path) {
    const std::pair<Handle*, const char*> objects[] = {{&comm_world, "ompi_mpi_comm_world"},
                                                       {&byte, "ompi_mpi_byte"},
                                                       {&errors_return, "ompi_mpi_errors_return"},
                                                       {&request_null, "ompi_request_null"}};
    for (const auto& [handle, name] : objects)
      if (!(*handle = dlsym(library, name))) return FailedPrecondition(path + " has no " + name);
    return Status::Ok();
  }
};

template <typename F>
Status Bind(void* library, const std::string& path, const char* name, F*& out) {
  out = reinterpret_cast<F*>(dlsym(library, name));
  if (!out) return FailedPrecondition(path + " has no " + name + ": not an MPI library");
  return Status::Ok();
}

}  // namespace

// The calls the plugin makes, through an ABI's types; requests and the communicator live in words.
class MpiLibrary::Calls {
 public:
  virtual ~Calls() = default;
  virtual const char* abi() const = 0;
  // Initialises MPI unless it runs already, and makes the plugin's communicator (a duplicate of
  // MPI_COMM_WORLD): this process's rank and the size in it.
  // `check` turns a call's error code into a status.
  using Check = std::function<Status(int code, const char* call)>;
  virtual Status Start(const Check& check, int* rank, int* size) = 0;
  virtual void FinalizeIfRunning() = 0;
  virtual int Isend(const void* data, int bytes, int peer, int tag, Request* request) = 0;
  virtual int Irecv(void* data, int bytes, int peer, int tag, Request* request) = 0;
  virtual int Test(Request* request, int* flag) = 0;
  virtual bool IsNull(Request request) const = 0;
  virtual void Abandon(Request* request, bool receive) = 0;
  virtual int ErrorString(int code, char* text, int* length) = 0;
};

namespace {

std::once_flag g_once;
MpiLibrary* g_library = nullptr;
Status g_status;
MpiLibrary::Calls* g_started = nullptr;  // the calls of a library this plugin initialised

template <typename Abi>
class AbiCalls final : public MpiLibrary::Calls {
  using H = typename Abi::Handle;
  using Request = MpiLibrary::Request;

 public:
  static StatusOr<std::unique_ptr<MpiLibrary::Calls>> Load(void* library, const std::string& path) {
    auto calls = std::make_unique<AbiCalls>();
    JMP_RETURN_IF_ERROR(calls->abi_.Resolve(library, path));
    Fn& f = calls->f_;
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Initialized", f.Initialized));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Init_thread", f.Init_thread));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Query_thread", f.Query_thread));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Finalized", f.Finalized));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Finalize", f.Finalize));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Comm_dup", f.Comm_dup));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Comm_set_errhandler", f.Comm_set_errhandler));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Comm_rank", f.Comm_rank));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Comm_size", f.Comm_size));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Isend", f.Isend));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Irecv", f.Irecv));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Test", f.Test));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Cancel", f.Cancel));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Request_free", f.Request_free));
    JMP_RETURN_IF_ERROR(Bind(library, path, "MPI_Error_string", f.Error_string));
    return std::unique_ptr<MpiLibrary::Calls>(std::move(calls));
  }

  const char* abi() const override { return Abi::kName; }

  Status Start(const Check& check, int* rank, int* size) override {
    int initialized = 0, finalized = 0, provided = 0;
    JMP_RETURN_IF_ERROR(check(f_.Finalized(&finalized), "MPI_Finalized"));
    if (finalized) return FailedPrecondition("MPI was finalized before the metal plugin could use it");
    JMP_RETURN_IF_ERROR(check(f_.Initialized(&initialized), "MPI_Initialized"));
    if (initialized) {
      JMP_RETURN_IF_ERROR(check(f_.Query_thread(&provided), "MPI_Query_thread"));
    } else {
      JMP_RETURN_IF_ERROR(check(f_.Init_thread(nullptr, nullptr, kThreadSerialized, &provided), "MPI_Init_thread"));
      // Finalised at exit only when this library started MPI (mpi4py finalises what it started).
      g_started = this;
      std::atexit([] { g_started->FinalizeIfRunning(); });
    }
    if (provided < kThreadSerialized)
      return FailedPrecondition("MPI was initialised with thread level " + std::to_string(provided) +
                                "; the metal plugin calls it from JAX's threads and needs MPI_THREAD_SERIALIZED");
    JMP_RETURN_IF_ERROR(check(f_.Comm_dup(abi_.comm_world, &comm_), "MPI_Comm_dup"));
    JMP_RETURN_IF_ERROR(check(f_.Comm_set_errhandler(comm_, abi_.errors_return), "MPI_Comm_set_errhandler"));
    JMP_RETURN_IF_ERROR(check(f_.Comm_rank(comm_, rank), "MPI_Comm_rank"));
    JMP_RETURN_IF_ERROR(check(f_.Comm_size(comm_, size), "MPI_Comm_size"));
    return Status::Ok();
  }

  void FinalizeIfRunning() override {
    int done = 0;
    if (f_.Finalized(&done) == kSuccess && !done) f_.Finalize();
  }

  int Isend(const void* data, int bytes, int peer, int tag, Request* request) override {
    H h = abi_.request_null;
    const int code = f_.Isend(data, bytes, abi_.byte, peer, tag, comm_, &h);
    *request = ToWord(h);
    return code;
  }
  int Irecv(void* data, int bytes, int peer, int tag, Request* request) override {
    H h = abi_.request_null;
    const int code = f_.Irecv(data, bytes, abi_.byte, peer, tag, comm_, &h);
    *request = ToWord(h);
    return code;
  }
  int Test(Request* request, int* flag) override {
    H h = FromWord(*request);
    const int code = f_.Test(&h, flag, abi_.status_ignore);
    *request = ToWord(h);
    return code;
  }
  bool IsNull(Request request) const override { return FromWord(request) == abi_.request_null; }
  void Abandon(Request* request, bool receive) override {
    H h = FromWord(*request);
    if (receive) f_.Cancel(&h);
    f_.Request_free(&h);
    *request = ToWord(h);
  }
  int ErrorString(int code, char* text, int* length) override { return f_.Error_string(code, text, length); }

 private:
  struct Fn {
    int (*Initialized)(int*);
    int (*Init_thread)(int*, char***, int, int*);
    int (*Query_thread)(int*);
    int (*Finalized)(int*);
    int (*Finalize)();
    int (*Comm_dup)(H, H*);
    int (*Comm_set_errhandler)(H, H);
    int (*Comm_rank)(H, int*);
    int (*Comm_size)(H, int*);
    int (*Isend)(const void*, int, H, int, int, H, H*);
    int (*Irecv)(void*, int, H, int, int, H, H*);
    int (*Test)(H*, int*, void*);
    int (*Cancel)(H*);
    int (*Request_free)(H*);
    int (*Error_string)(int, char*, int*);
  };

  static Request ToWord(H h) {
    if constexpr (std::is_pointer_v<H>)
      return reinterpret_cast<Request>(h);
    else
      return static_cast<Request>(static_cast<unsigned>(h));
  }
  static H FromWord(Request w) {
    if constexpr (std::is_pointer_v<H>)
      return reinterpret_cast<H>(w);
    else
      return static_cast<H>(static_cast<unsigned>(w));
  }
  Abi abi_;
  Fn f_{};
  H comm_{};
};

}  // namespace

namespace {

// The library mpi4py (or the application) loaded already, else JAX_METAL_LIBMPI (set by the Python
// package to the `mpich` wheel's library when it is installed), else the loader's search.
StatusOr<std::pair<void*, std::string>> Open() {
  for (const char* name : kLibraryNames)
    if (void* h = dlopen(name, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) return std::make_pair(h, std::string(name));
  std::string tried;
  if (const char* path = std::getenv("JAX_METAL_LIBMPI"); path && *path) {
    if (void* h = dlopen(path, RTLD_LAZY | RTLD_LOCAL)) return std::make_pair(h, std::string(path));
    tried = std::string(path) + " (" + dlerror() + "); ";
  }
  for (const char* name : kLibraryNames) {
    if (void* h = dlopen(name, RTLD_LAZY | RTLD_LOCAL)) return std::make_pair(h, std::string(name));
    tried += std::string(name) + "; ";
  }
  return FailedPrecondition(
      "a JAX program over several processes needs MPI (MPICH or Open MPI), and none was found (tried " + tried +
      "set JAX_METAL_LIBMPI to its path): pip install \"jax-metal-plugin[mpi]\" and launch with mpiexec");
}

// Open MPI's predefined objects are symbols of its library; MPICH's handles are plain values.
StatusOr<std::unique_ptr<MpiLibrary::Calls>> CallsFor(void* library, const std::string& path) {
  if (dlsym(library, "ompi_mpi_comm_world")) return AbiCalls<OpenMpi>::Load(library, path);
  return AbiCalls<Mpich>::Load(library, path);
}

}  // namespace

const char* MpiLibrary::abi() const { return calls_->abi(); }

Status MpiLibrary::Check(int code, const char* call) const {
  if (code == kSuccess) return Status::Ok();
  char text[kErrorText] = {};
  int length = 0;
  if (calls_->ErrorString(code, text, &length) != kSuccess || length < 0 || length > kErrorText) length = 0;
  return Internal(std::string("MPI (") + calls_->abi() + "): " + call +
                  " failed: " + std::string(text, static_cast<size_t>(length)));
}

StatusOr<MpiLibrary*> MpiLibrary::Get() {
  std::call_once(g_once, [] {
    auto load = []() -> StatusOr<MpiLibrary*> {
      JMP_ASSIGN_OR_RETURN(auto opened, Open());
      auto lib = std::unique_ptr<MpiLibrary>(new MpiLibrary);
      lib->path_ = opened.second;
      JMP_ASSIGN_OR_RETURN(lib->calls_, CallsFor(opened.first, lib->path_));
      MpiLibrary& l = *lib;
      JMP_RETURN_IF_ERROR(
          l.calls_->Start([&l](int code, const char* call) { return l.Check(code, call); }, &l.rank_, &l.size_));
      return lib.release();
    };
    StatusOr<MpiLibrary*> lib = load();
    if (lib.ok())
      g_library = *lib;
    else
      g_status = lib.status();
  });
  if (!g_library) return g_status;
  return g_library;
}

Status MpiLibrary::Isend(const void* data, size_t bytes, int peer, int tag, Request* request) {
  return Check(calls_->Isend(data, static_cast<int>(bytes), peer, tag, request), "MPI_Isend");
}

Status MpiLibrary::Irecv(void* data, size_t bytes, int peer, int tag, Request* request) {
  return Check(calls_->Irecv(data, static_cast<int>(bytes), peer, tag, request), "MPI_Irecv");
}

StatusOr<bool> MpiLibrary::Test(Request* request) {
  if (calls_->IsNull(*request)) return true;
  int flag = 0;
  JMP_RETURN_IF_ERROR(Check(calls_->Test(request, &flag), "MPI_Test"));
  return flag != 0;
}

void MpiLibrary::Abandon(Request* request, bool receive) {
  if (calls_->IsNull(*request)) return;
  calls_->Abandon(request, receive);
}

}  // namespace jmp::pjrt
