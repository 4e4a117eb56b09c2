// A custom call's backend_config read as the typed attributes stablehlo/custom_calls.def declares for
// its target, so no rule splits a string by position: every error names the target and the attribute.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "stablehlo/ir.h"
#include "support/status.h"

namespace jmp::mps {

enum class CustomCallAttrType : uint8_t { kBool, kInt, kFloat };
std::string_view CustomCallAttrTypeName(CustomCallAttrType type);  // "bool", "int", "float"

class CustomCallConfig {
 public:
  // Reads `text`, the backend_config of a custom call to `target`. An unknown target, an attribute its row
  // does not declare, a repeated one, or a value not of the declared type: InvalidArgument naming them.
  static StatusOr<CustomCallConfig> Parse(std::string_view target, std::string_view text);
  // The same for a stablehlo.custom_call op (its call_target_name and backend_config, a string).
  static StatusOr<CustomCallConfig> Of(const shlo::Op& op);

  // The attribute's value, or `absent` when the config leaves it out. `name` must be one the target's row
  // declares with that type (a rule's own mistake otherwise, which also gives `absent`).
  bool Bool(std::string_view name, bool absent) const;
  int64_t Int(std::string_view name, int64_t absent) const;
  double Float(std::string_view name, double absent) const;

 private:
  struct Value {
    CustomCallAttrType type;
    bool b = false;
    int64_t i = 0;
    double f = 0;
  };
  const Value* Find(std::string_view name, CustomCallAttrType type) const;
  std::map<std::string, Value, std::less<>> values_;
};

}  // namespace jmp::mps
