// What the reader knows about each VHLO op: its StableHLO name and its inherent attributes, in the
// sorted order their indices take in the op's properties blob (StableHLO >= 0.15 artifacts).
#pragma once

#include <string_view>
#include <vector>

namespace jmp::shlo {

struct VhloOpInfo {
  std::string_view vhlo_name;                // "dot_general_v2"
  std::string_view base_name;                // "dot_general"
  std::vector<std::string_view> attr_names;  // sorted
};

const VhloOpInfo* FindVhloOp(std::string_view vhlo_name);

}  // namespace jmp::shlo
