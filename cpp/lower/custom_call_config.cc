#include "lower/custom_call_config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace jmp::mps {

namespace {

enum class Format : uint8_t { kNamed, kPositional };

struct Attr {
  std::string_view name;
  CustomCallAttrType type;
};

struct Target {
  std::string_view name;
  Format format;
  std::vector<Attr> attrs;
};

// stablehlo/custom_calls.def, rows by target.
const std::vector<Target>& Targets() {
  static const std::vector<Target> targets = [] {
    std::vector<Target> t;
    std::map<std::string_view, size_t> index;
#define JMP_CUSTOM_CALL(id, target, format) \
  index[#id] = t.size();                    \
  t.push_back({target, Format::format, {}});
#define JMP_CUSTOM_CALL_ATTR(id, name, type) t[index.at(#id)].attrs.push_back({#name, CustomCallAttrType::type});
#include "stablehlo/custom_calls.def"
    return t;
  }();
  return targets;
}

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

std::vector<std::string_view> Split(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == ',') {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

bool ParseValue(std::string_view text, CustomCallAttrType type, bool* b, int64_t* i, double* f) {
  const std::string s(text);
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  switch (type) {
    case CustomCallAttrType::kBool: *b = s == "true" || s == "1"; return *b || s == "false" || s == "0";
    case CustomCallAttrType::kInt: *i = std::strtoll(s.c_str(), &end, 10); break;
    case CustomCallAttrType::kFloat:
      *f = std::strtod(s.c_str(), &end);
      if (!std::isfinite(*f)) return false;
      break;
  }
  return errno == 0 && end == s.c_str() + s.size();
}

}  // namespace

std::string_view CustomCallAttrTypeName(CustomCallAttrType type) {
  switch (type) {
    case CustomCallAttrType::kBool: return "bool";
    case CustomCallAttrType::kInt: return "int";
    case CustomCallAttrType::kFloat: return "float";
  }
  return "?";
}

StatusOr<CustomCallConfig> CustomCallConfig::Parse(std::string_view target, std::string_view text) {
  const Target* row = nullptr;
  for (const Target& t : Targets())
    if (t.name == target) row = &t;
  const std::string where = "custom_call " + std::string(target) + ": backend_config ";
  if (row == nullptr) return InvalidArgument("custom_call " + Quoted(target) + " has no attribute table");
  std::string declared;
  for (const Attr& a : row->attrs)
    declared +=
        (declared.empty() ? "" : ", ") + std::string(a.name) + ":" + std::string(CustomCallAttrTypeName(a.type));
  if (declared.empty()) declared = "none";
  CustomCallConfig config;
  if (text.empty()) return config;
  const std::vector<std::string_view> fields = Split(text);
  for (size_t k = 0; k < fields.size(); ++k) {
    std::string_view name, value;
    if (row->format == Format::kPositional) {
      if (k >= row->attrs.size())
        return InvalidArgument(where + Quoted(text) + " has " + std::to_string(fields.size()) +
                               " fields, expected at most " + std::to_string(row->attrs.size()) + " (" + declared +
                               ")");
      name = row->attrs[k].name;
      value = fields[k];
      if (value.empty()) continue;  // absent
    } else {
      const size_t eq = fields[k].find('=');
      if (eq == std::string_view::npos)
        return InvalidArgument(where + Quoted(text) + ": " + Quoted(fields[k]) +
                               " is not name=value (attributes: " + declared + ")");
      name = fields[k].substr(0, eq);
      value = fields[k].substr(eq + 1);
    }
    const Attr* attr = nullptr;
    for (const Attr& a : row->attrs)
      if (a.name == name) attr = &a;
    if (attr == nullptr)
      return InvalidArgument(where + "has an unknown attribute " + Quoted(name) + " (attributes: " + declared + ")");
    if (config.values_.count(name)) return InvalidArgument(where + "repeats attribute " + Quoted(name));
    Value v{attr->type};
    if (!ParseValue(value, attr->type, &v.b, &v.i, &v.f))
      return InvalidArgument(where + "attribute " + Quoted(name) + ": " + Quoted(value) + " is not a " +
                             std::string(CustomCallAttrTypeName(attr->type)));
    config.values_.emplace(std::string(name), v);
  }
  return config;
}

StatusOr<CustomCallConfig> CustomCallConfig::Of(const shlo::Op& op) {
  const shlo::Attr* target = op.Find("call_target_name");
  const shlo::Attr* config = op.Find("backend_config");
  if (!target || target->kind != shlo::Attr::Kind::kString) return InvalidArgument("custom_call without a target");
  if (config && config->kind != shlo::Attr::Kind::kString)
    return InvalidArgument("custom_call " + target->s + ": backend_config is not a string");
  return Parse(target->s, config ? std::string_view(config->s) : std::string_view());
}

const CustomCallConfig::Value* CustomCallConfig::Find(std::string_view name, CustomCallAttrType type) const {
  auto it = values_.find(name);
  return it != values_.end() && it->second.type == type ? &it->second : nullptr;
}

bool CustomCallConfig::Bool(std::string_view name, bool absent) const {
  const Value* v = Find(name, CustomCallAttrType::kBool);
  return v ? v->b : absent;
}

int64_t CustomCallConfig::Int(std::string_view name, int64_t absent) const {
  const Value* v = Find(name, CustomCallAttrType::kInt);
  return v ? v->i : absent;
}

double CustomCallConfig::Float(std::string_view name, double absent) const {
  const Value* v = Find(name, CustomCallAttrType::kFloat);
  return v ? v->f : absent;
}

}  // namespace jmp::mps
