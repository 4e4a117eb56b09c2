// From VHLO, as the bytecode reader hands it over, to our IR: every op version (`*_v1`, `*_v2`) becomes
// its StableHLO op in the newest form, functions become Funcs, other dialects' discardable attributes
// (sdy.*, mhlo.*, jax.*) and module-level ops are dropped, but for shardings: mhlo.sharding and
// mhlo.frontend_attributes (where Shardy's export leaves its meshes and manual computations' shardings).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stablehlo/bytecode_reader.h"
#include "stablehlo/ir.h"

namespace jmp::shlo {

// Takes the StableHLO version from the producer string ("StableHLO_v1.9.0"); fails unless it is one
// this reader handles.
Status ReadProducer(std::string_view producer, Module* module);

class VhloNormalizer : public OpSink {
 public:
  bool KeepAttribute(const std::string& name) const override;
  const std::vector<std::string_view>* PropertyNames(const EncodedOp& op) const override;
  Status Finish(EncodedOp& op, RegionReader& regions) override;

  // The functions read so far, in the artifact's order.
  std::vector<Func>& funcs() { return funcs_; }
  // The module's xla.sdy.meshes frontend attribute, or "".
  std::string& sdy_meshes() { return sdy_meshes_; }

 private:
  Status FinishFunc(const AttrMap& attrs, Func* func, const std::string& where);

  std::vector<Func> funcs_;
  std::string sdy_meshes_;
};

}  // namespace jmp::shlo
