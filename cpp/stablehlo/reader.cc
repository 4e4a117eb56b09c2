// Reads a VHLO portable artifact (MLIR bytecode holding the builtin and vhlo dialects) into our
// StableHLO IR: bytecode_reader.cc walks the container, vhlo_normalize.cc gives each op its meaning.
#include "stablehlo/bytecode_reader.h"
#include "stablehlo/ir.h"
#include "stablehlo/passes/region_shardings.h"
#include "stablehlo/vhlo_normalize.h"

namespace jmp::shlo {

StatusOr<Module> ReadArtifact(const uint8_t* data, size_t size) {
  if (!data && size) return InvalidArgument("null artifact");
  BytecodeReader reader(data, size);
  JMP_RETURN_IF_ERROR(reader.ReadHeader());
  Module module;
  JMP_RETURN_IF_ERROR(ReadProducer(reader.producer(), &module));
  JMP_RETURN_IF_ERROR(reader.ReadSections());
  VhloNormalizer normalizer;
  JMP_RETURN_IF_ERROR(reader.ReadIR(normalizer));
  module.funcs = std::move(normalizer.funcs());
  module.sdy_meshes = std::move(normalizer.sdy_meshes());
  if (module.funcs.empty()) return InvalidArgument("malformed artifact: no functions");
  ForwardRegionShardings(module);
  return module;
}

}  // namespace jmp::shlo
