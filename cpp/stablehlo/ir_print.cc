// Our StableHLO IR as text (MLIR-like, one op a line) and the small IR helpers.
#include <sstream>

#include "stablehlo/ir.h"

namespace jmp::shlo {

int64_t Type::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > INT64_MAX / d)) return -1;
    n *= d;
  }
  return n;
}

std::string Type::ToString() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::kTensor:
      os << "tensor<";
      for (int64_t d : shape) os << d << 'x';
      os << DTypeName(dtype) << '>';
      break;
    case Kind::kTuple:
      os << "tuple<";
      for (size_t i = 0; i < elements.size(); ++i) os << (i ? ", " : "") << elements[i].ToString();
      os << '>';
      break;
    case Kind::kToken: os << "!stablehlo.token"; break;
    case Kind::kOther: os << '!' << other; break;
  }
  return os.str();
}

std::string Attr::ToString() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::kUnit: os << "unit"; break;
    case Kind::kBool: os << (b ? "true" : "false"); break;
    case Kind::kInt: os << i; break;
    case Kind::kFloat: os << f; break;
    case Kind::kString: os << '"' << s << '"'; break;
    case Kind::kSymbol: os << '@' << s; break;
    case Kind::kEnum: os << s; break;
    case Kind::kType: os << type.ToString(); break;
    case Kind::kInts:
      os << '[';
      for (size_t k = 0; k < ints.size(); ++k) os << (k ? ", " : "") << ints[k];
      os << ']';
      break;
    case Kind::kTensor: os << "dense<" << data.size() << " bytes> : " << type.ToString(); break;
    case Kind::kArray:
      os << '[';
      for (size_t k = 0; k < array.size(); ++k) os << (k ? ", " : "") << array[k].ToString();
      os << ']';
      break;
    case Kind::kDict: {
      os << '{';
      bool first = true;
      for (const auto& [name, value] : dict) {
        os << (first ? "" : ", ") << name << " = " << value.ToString();
        first = false;
      }
      os << '}';
      break;
    }
  }
  return os.str();
}

const Attr* Op::Find(const std::string& attr_name) const {
  auto it = attrs.find(attr_name);
  return it == attrs.end() ? nullptr : &it->second;
}

StatusOr<Donation> DonationOf(const Func& main) {
  Donation d;
  size_t n = main.arg_types.size();
  d.aliased_output.assign(n, -1);
  d.donated.assign(n, false);
  std::vector<int64_t> aliased_by(main.result_types.size(), -1);
  for (size_t i = 0; i < n && i < main.arg_attrs.size(); ++i) {
    const AttrMap& attrs = main.arg_attrs[i];
    std::string arg = "@" + main.name + " argument " + std::to_string(i);
    if (auto it = attrs.find("tf.aliasing_output"); it != attrs.end()) {
      if (it->second.kind != Attr::Kind::kInt)
        return InvalidArgument(arg + ": tf.aliasing_output is not an integer but " + it->second.ToString());
      int64_t out = it->second.i;
      if (out < 0 || static_cast<size_t>(out) >= main.result_types.size())
        return InvalidArgument(arg + ": tf.aliasing_output = " + std::to_string(out) + " names no result (@" +
                               main.name + " has " + std::to_string(main.result_types.size()) + ")");
      const Type& at = main.arg_types[i];
      const Type& rt = main.result_types[static_cast<size_t>(out)];
      if (at.kind != Type::Kind::kTensor || rt.kind != Type::Kind::kTensor || at.dtype != rt.dtype ||
          at.shape != rt.shape)
        return InvalidArgument(arg + " of type " + at.ToString() + " is aliased to result " + std::to_string(out) +
                               " of type " + rt.ToString());
      if (aliased_by[static_cast<size_t>(out)] >= 0)
        return InvalidArgument("@" + main.name + " result " + std::to_string(out) + " is aliased by arguments " +
                               std::to_string(aliased_by[static_cast<size_t>(out)]) + " and " + std::to_string(i));
      aliased_by[static_cast<size_t>(out)] = static_cast<int64_t>(i);
      d.aliased_output[i] = out;
      d.donated[i] = true;
    }
    if (auto it = attrs.find("jax.buffer_donor"); it != attrs.end()) {
      if (it->second.kind != Attr::Kind::kBool)
        return InvalidArgument(arg + ": jax.buffer_donor is not a boolean but " + it->second.ToString());
      if (it->second.b) d.donated[i] = true;
    }
  }
  // A buffer donor without an alias of its own is consumed only where a result of its size in bytes is
  // left to take its memory, first come first served, as XLA pairs donors with outputs; any other stays
  // alive (JAX warns that it was not usable).
  auto bytes = [](const Type& t) { return t.NumElements() * static_cast<int64_t>(ByteSize(t.dtype)); };
  for (size_t i = 0; i < n; ++i) {
    if (!d.donated[i] || d.aliased_output[i] >= 0) continue;
    d.donated[i] = false;
    const Type& at = main.arg_types[i];
    if (at.kind != Type::Kind::kTensor) continue;
    for (size_t j = 0; j < main.result_types.size(); ++j) {
      const Type& rt = main.result_types[j];
      if (aliased_by[j] >= 0 || rt.kind != Type::Kind::kTensor || bytes(rt) != bytes(at)) continue;
      aliased_by[j] = static_cast<int64_t>(i);
      d.aliased_output[i] = static_cast<int64_t>(j);
      d.donated[i] = true;
      break;
    }
  }
  return d;
}

const Func* Module::FindFunc(const std::string& name) const {
  for (const Func& f : funcs)
    if (f.name == name) return &f;
  return nullptr;
}

namespace {

void PrintRegion(std::ostream& os, const Func& f, const Region& region, int indent);

void PrintOp(std::ostream& os, const Func& f, const Op& op, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  os << pad;
  for (size_t i = 0; i < op.results.size(); ++i) os << (i ? ", " : "") << '%' << op.results[i];
  if (!op.results.empty()) os << " = ";
  os << op.name << '(';
  for (size_t i = 0; i < op.operands.size(); ++i) os << (i ? ", " : "") << '%' << op.operands[i];
  os << ')';
  if (!op.attrs.empty()) {
    os << " {";
    bool first = true;
    for (const auto& [name, value] : op.attrs) {
      os << (first ? "" : ", ") << name << " = " << value.ToString();
      first = false;
    }
    os << '}';
  }
  os << " : (";
  for (size_t i = 0; i < op.operands.size(); ++i)
    os << (i ? ", " : "") << f.value_types[static_cast<size_t>(op.operands[i])].ToString();
  os << ") -> (";
  for (size_t i = 0; i < op.results.size(); ++i)
    os << (i ? ", " : "") << f.value_types[static_cast<size_t>(op.results[i])].ToString();
  os << ')';
  if (!op.location.empty()) os << " loc(\"" << op.location << "\")";
  os << '\n';
  for (const Region& r : op.regions) PrintRegion(os, f, r, indent + 2);
}

void PrintRegion(std::ostream& os, const Func& f, const Region& region, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  os << pad << "{\n";
  for (size_t b = 0; b < region.blocks.size(); ++b) {
    const Block& block = region.blocks[b];
    os << pad << "^bb" << b << '(';
    for (size_t i = 0; i < block.args.size(); ++i)
      os << (i ? ", " : "") << '%' << block.args[i] << ": "
         << f.value_types[static_cast<size_t>(block.args[i])].ToString();
    os << "):\n";
    for (const Op& op : block.ops) PrintOp(os, f, op, indent + 2);
  }
  os << pad << "}\n";
}

}  // namespace

std::string PrintModule(const Module& module) {
  std::ostringstream os;
  os << "// producer " << module.producer << '\n';
  for (const Func& f : module.funcs) {
    os << "func " << (f.is_public ? "public " : "private ") << '@' << f.name << '(';
    auto with_attrs = [&](const std::vector<Type>& types, const std::vector<AttrMap>& attrs) {
      for (size_t i = 0; i < types.size(); ++i) {
        os << (i ? ", " : "") << types[i].ToString();
        if (i < attrs.size() && !attrs[i].empty()) {
          Attr dict;
          dict.kind = Attr::Kind::kDict;
          dict.dict = attrs[i];
          os << ' ' << dict.ToString();
        }
      }
    };
    with_attrs(f.arg_types, f.arg_attrs);
    os << ") -> (";
    with_attrs(f.result_types, f.result_attrs);
    os << ")\n";
    PrintRegion(os, f, f.body, 0);
  }
  return os.str();
}

}  // namespace jmp::shlo
