#include "pjrt/mpi_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

namespace jmp::pjrt {

namespace {

// MPICH's ABI: handle and constant values (its mpi.h), the status layout passed only as "ignore".
constexpr int kCommWorld = 0x44000000;
constexpr int kByte = 0x4c00010d;
constexpr int kErrorsReturn = 0x54000001;
constexpr int kRequestNull = 0x2c000000;
constexpr int kThreadSerialized = 2;
constexpr int kSuccess = 0;
constexpr int kMaxErrorString = 512;
void* const kStatusIgnore = reinterpret_cast<void*>(1);

#ifdef __APPLE__
const char* const kLibraryNames[] = {"libmpi.12.dylib", "libmpi.dylib"};
#else
const char* const kLibraryNames[] = {"libmpi.so.12", "libmpi.so"};
#endif

}  // namespace

struct MpiLibrary::Functions {
  int (*Initialized)(int*);
  int (*Init_thread)(int*, char***, int, int*);
  int (*Query_thread)(int*);
  int (*Finalized)(int*);
  int (*Finalize)();
  int (*Comm_dup)(int, int*);
  int (*Comm_set_errhandler)(int, int);
  int (*Comm_rank)(int, int*);
  int (*Comm_size)(int, int*);
  int (*Isend)(const void*, int, int, int, int, int, int*);
  int (*Irecv)(void*, int, int, int, int, int, int*);
  int (*Test)(int*, int*, void*);
  int (*Cancel)(int*);
  int (*Request_free)(int*);
  int (*Error_string)(int, char*, int*);
};

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
      "a JAX program over several processes needs MPI (MPICH's ABI), and none was found (tried " + tried +
      "set JAX_METAL_LIBMPI to its path): pip install \"jax-metal-plugin[mpi]\" and launch with mpiexec");
}

template <typename F>
Status Bind(void* handle, const std::string& path, const char* name, F*& out) {
  out = reinterpret_cast<F*>(dlsym(handle, name));
  if (!out) return FailedPrecondition(path + " has no " + name + ": not an MPI library with MPICH's ABI");
  return Status::Ok();
}

std::once_flag g_once;
MpiLibrary* g_library = nullptr;
Status g_status;

}  // namespace

Status MpiLibrary::Check(int code, const char* call) const {
  if (code == kSuccess) return Status::Ok();
  char text[kMaxErrorString] = {};
  int length = 0;
  if (fn_->Error_string(code, text, &length) != kSuccess) length = 0;
  return Internal(std::string("MPI: ") + call + " failed: " + std::string(text, static_cast<size_t>(length)));
}

StatusOr<MpiLibrary*> MpiLibrary::Get() {
  std::call_once(g_once, [] {
    auto load = []() -> StatusOr<MpiLibrary*> {
      JMP_ASSIGN_OR_RETURN(auto opened, Open());
      auto* lib = new MpiLibrary;
      lib->fn_ = new Functions;
      lib->path_ = opened.second;
      void* h = opened.first;
      Functions& f = *lib->fn_;
      const std::string& p = lib->path_;
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Initialized", f.Initialized));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Init_thread", f.Init_thread));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Query_thread", f.Query_thread));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Finalized", f.Finalized));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Finalize", f.Finalize));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Comm_dup", f.Comm_dup));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Comm_set_errhandler", f.Comm_set_errhandler));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Comm_rank", f.Comm_rank));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Comm_size", f.Comm_size));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Isend", f.Isend));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Irecv", f.Irecv));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Test", f.Test));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Cancel", f.Cancel));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Request_free", f.Request_free));
      JMP_RETURN_IF_ERROR(Bind(h, p, "MPI_Error_string", f.Error_string));
      int initialized = 0, finalized = 0, provided = 0;
      JMP_RETURN_IF_ERROR(lib->Check(f.Finalized(&finalized), "MPI_Finalized"));
      if (finalized) return FailedPrecondition("MPI was finalized before the metal plugin could use it");
      JMP_RETURN_IF_ERROR(lib->Check(f.Initialized(&initialized), "MPI_Initialized"));
      if (initialized) {
        JMP_RETURN_IF_ERROR(lib->Check(f.Query_thread(&provided), "MPI_Query_thread"));
      } else {
        JMP_RETURN_IF_ERROR(
            lib->Check(f.Init_thread(nullptr, nullptr, kThreadSerialized, &provided), "MPI_Init_thread"));
        // Finalised at exit only when this library started MPI (mpi4py finalises what it started).
        std::atexit([] {
          int done = 0;
          if (g_library->fn_->Finalized(&done) == kSuccess && !done) g_library->fn_->Finalize();
        });
      }
      if (provided < kThreadSerialized)
        return FailedPrecondition("MPI was initialised with thread level " + std::to_string(provided) +
                                  "; the metal plugin calls it from JAX's threads and needs MPI_THREAD_SERIALIZED");
      JMP_RETURN_IF_ERROR(lib->Check(f.Comm_dup(kCommWorld, &lib->comm_), "MPI_Comm_dup"));
      JMP_RETURN_IF_ERROR(lib->Check(f.Comm_set_errhandler(lib->comm_, kErrorsReturn), "MPI_Comm_set_errhandler"));
      JMP_RETURN_IF_ERROR(lib->Check(f.Comm_rank(lib->comm_, &lib->rank_), "MPI_Comm_rank"));
      JMP_RETURN_IF_ERROR(lib->Check(f.Comm_size(lib->comm_, &lib->size_), "MPI_Comm_size"));
      return lib;
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
  return Check(fn_->Isend(data, static_cast<int>(bytes), kByte, peer, tag, comm_, request), "MPI_Isend");
}

Status MpiLibrary::Irecv(void* data, size_t bytes, int peer, int tag, Request* request) {
  return Check(fn_->Irecv(data, static_cast<int>(bytes), kByte, peer, tag, comm_, request), "MPI_Irecv");
}

StatusOr<bool> MpiLibrary::Test(Request* request) {
  if (*request == kRequestNull) return true;
  int flag = 0;
  JMP_RETURN_IF_ERROR(Check(fn_->Test(request, &flag, kStatusIgnore), "MPI_Test"));
  return flag != 0;
}

void MpiLibrary::Abandon(Request* request, bool receive) {
  if (*request == kRequestNull) return;
  if (receive) fn_->Cancel(request);
  fn_->Request_free(request);
}

}  // namespace jmp::pjrt
