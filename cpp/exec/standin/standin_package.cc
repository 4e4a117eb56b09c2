// The stand-in's MPSGraph packages: a directory holding its own serialization of the recorded program
// (a versioned header, the feeds' and targets' shaped types in the executable's order, and the graph).
// Reading checks every length, index and type, so corrupt bytes give an error, never a crash.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "exec/standin/standin_internal.h"
#include "mps/graph_serial.h"
#include "support/byte_stream.h"

namespace jmp::exec::standin {

namespace {

constexpr char kMagic[] = "jax-metal-plugin MPSGraph stand-in package";
constexpr uint64_t kVersion = 1;
constexpr char kFile[] = "/program.bin";

void WriteTypes(const std::vector<ShapedType>& types, ByteWriter& out) {
  out.U64(types.size());
  for (const ShapedType& t : types) {
    out.I64s(t.shape);
    out.U64(static_cast<uint32_t>(t.dataType));
  }
}

StatusOr<std::vector<ShapedType>> ReadTypes(ByteReader& in) {
  JMP_ASSIGN_OR_RETURN(size_t n, in.Count(16));
  std::vector<ShapedType> types(n);
  for (ShapedType& t : types) {
    JMP_ASSIGN_OR_RETURN(t.shape, in.I64s());
    JMP_ASSIGN_OR_RETURN(uint64_t dt, in.U64());
    t.dataType = static_cast<DataType>(static_cast<uint32_t>(dt));
    if (dt > UINT32_MAX || !HostDType(t.dataType).ok() || ElementCount(t.shape) <= 0)
      return in.Malformed("a shaped type that is not a stand-in tensor's");
  }
  return types;
}

// The graph's parameters (or results) must be exactly these types, in order.
Status Matches(const mps::Graph& g, const std::vector<int>& ids, const std::vector<ShapedType>& types,
               const std::string& what) {
  if (ids.size() != types.size()) return Violation("package: the graph's " + what + " count differs from its header's");
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= g.values.size())
      return Violation("package: " + what + " " + std::to_string(i) + " names no value of the graph");
    auto d = HostDType(types[i].dataType);
    if (!d.ok() || g.type(ids[i]).dtype != *d || g.type(ids[i]).shape != types[i].shape)
      return Violation("package: " + what + " " + std::to_string(i) + " differs from its header's type");
  }
  return Status::Ok();
}

}  // namespace

Status WritePackage(const Program& program, const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Internal(std::string(kPrefix) + "serializeToMPSGraphPackageAtURL: cannot create " + dir + ": " +
                    std::strerror(errno));
  ByteWriter out;
  out.Bytes(kMagic);
  out.U64(kVersion);
  WriteTypes(program.feeds, out);
  WriteTypes(program.targets, out);
  mps::WriteGraph(program.graph, out);
  std::ofstream f(dir + kFile, std::ios::binary | std::ios::trunc);
  f.write(out.str().data(), static_cast<std::streamsize>(out.str().size()));
  if (!f) return Internal(std::string(kPrefix) + "serializeToMPSGraphPackageAtURL: cannot write " + dir + kFile);
  return Status::Ok();
}

StatusOr<Program> ReadPackage(const std::string& dir) {
  std::ifstream f(dir + kFile, std::ios::binary);
  if (!f) return InvalidArgument(std::string(kPrefix) + "initWithMPSGraphPackageAtURL: no package at " + dir);
  std::stringstream buffer;
  buffer << f.rdbuf();
  const std::string bytes = buffer.str();
  ByteReader in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), std::string(kPrefix) + "package " + dir);
  JMP_ASSIGN_OR_RETURN(std::string_view magic, in.Bytes());
  if (magic != kMagic) return in.Malformed("not a stand-in package");
  JMP_ASSIGN_OR_RETURN(uint64_t version, in.U64());
  if (version != kVersion)
    return in.Malformed("version " + std::to_string(version) + ", expected " + std::to_string(kVersion));
  Program p;
  JMP_ASSIGN_OR_RETURN(p.feeds, ReadTypes(in));
  JMP_ASSIGN_OR_RETURN(p.targets, ReadTypes(in));
  StatusOr<mps::Graph> graph = mps::ReadGraph(in);
  if (!graph.ok()) return InvalidArgument(std::string(kPrefix) + "package " + dir + ": " + graph.status().message());
  p.graph = std::move(*graph);
  if (in.left() != 0) return in.Malformed("bytes after the graph");
  JMP_RETURN_IF_ERROR(Matches(p.graph, p.graph.inputs, p.feeds, "feed"));
  JMP_RETURN_IF_ERROR(Matches(p.graph, p.graph.outputs, p.targets, "target"));
  return p;
}

}  // namespace jmp::exec::standin
