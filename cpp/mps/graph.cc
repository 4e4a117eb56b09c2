#include "mps/graph.h"

#include <sstream>

#include "mps/op_domain.h"

namespace jmp::mps {

namespace {

struct OpKindInfo {
  std::string_view name;
  int macos;
  std::string_view selector;
  DTypeDomain domain;
  std::string_view domain_name;
};

constexpr OpKindInfo kOpKindInfo[] = {
#define JMP_MPS_OP(name, macos, selector, domain) \
  {#name, macos, selector, JMP_DOMAIN_##domain(JMP_DOMAIN_FIELDS, ), #domain},
#include "mps/op_kinds.def"
};

const OpKindInfo& Info(OpKind kind) { return kOpKindInfo[static_cast<size_t>(kind)]; }

}  // namespace

std::string_view OpKindName(OpKind kind) { return Info(kind).name; }
std::string_view OpKindSelector(OpKind kind) { return Info(kind).selector; }
int OpKindMacOS(OpKind kind) { return Info(kind).macos; }
bool OpKindHostOnly(OpKind kind) { return Info(kind).macos == 0; }
DTypeDomain OpKindDomain(OpKind kind) { return Info(kind).domain; }
std::string_view OpKindDomainName(OpKind kind) { return Info(kind).domain_name; }

bool HasEffects(const Op& op) {
  return op.kind == OpKind::kPythonCallback ||
         (op.kind == OpKind::kAllReduce && !op.Attrs<AllReduceAttrs>().processes.empty());
}

bool BinaryOpOf(OpKind kind, BinaryOp* op) {
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) \
  if (kind == OpKind::k##name) return *op = BinaryOp::k##name, true;
#include "mps/op_kinds.def"
  return false;
}

bool DTypeDomain::Has(DType t) const {
  if (IsFloat(t))
    return floats == 1 || (floats == 2 && (t == DType::kF32 || t == DType::kF64)) ||
           (floats == 3 && (t == DType::kF16 || t == DType::kBF16 || t == DType::kF32)) ||
           (floats == 4 && t != DType::kBF16);
  if (IsInteger(t)) return ints == 1 || (ints == 2 && (t == DType::kI32 || t == DType::kI64));
  if (IsComplex(t)) return complexes;
  return t == DType::kBool && bools;
}

int64_t TensorType::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorType::ToString() const {
  std::ostringstream os;
  os << DTypeName(dtype) << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ']';
  return os.str();
}

int Graph::AddValue(DType dtype, std::vector<int64_t> shape) {
  values.push_back(TensorType{dtype, std::move(shape)});
  return static_cast<int>(values.size()) - 1;
}

namespace {

struct Notes {
  const std::vector<std::string>& before;
  const std::vector<std::string>& after;
  void Before(std::ostream& os, size_t i) const {
    if (i < before.size() && !before[i].empty()) os << "  " << before[i] << '\n';
  }
};

void PrintGraph(std::ostream& os, const Graph& g, const std::string& indent, const Notes* notes = nullptr) {
  os << "graph(";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    os << (i ? ", " : "") << '%' << g.inputs[i] << ": " << g.type(g.inputs[i]).ToString();
  os << ") {\n";
  for (size_t k = 0; k < g.ops.size(); ++k) {
    const Op& op = g.ops[k];
    if (notes) notes->Before(os, k);
    os << indent << "  ";
    for (size_t i = 0; i < op.outputs.size(); ++i) os << (i ? ", " : "") << '%' << op.outputs[i];
    os << " = " << OpKindName(op.kind) << '(';
    for (size_t i = 0; i < op.inputs.size(); ++i) os << (i ? ", " : "") << '%' << op.inputs[i];
    os << ')';
    os << AttrsToString(op.attrs);
    os << " : ";
    for (size_t i = 0; i < op.outputs.size(); ++i) os << (i ? ", " : "") << g.type(op.outputs[i]).ToString();
    if (notes && k < notes->after.size()) os << notes->after[k];
    os << '\n';
    for (const Graph& sub : op.subgraphs) {
      os << indent << "    ";
      PrintGraph(os, sub, indent + "    ");
    }
  }
  if (notes) notes->Before(os, g.ops.size());
  os << indent << "  return ";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : "") << '%' << g.outputs[i];
  os << '\n' << indent << "}\n";
}

}  // namespace

std::string Graph::ToString() const {
  std::ostringstream os;
  PrintGraph(os, *this, "");
  return os.str();
}

std::string Graph::ToString(const std::vector<std::string>& before, const std::vector<std::string>& after) const {
  std::ostringstream os;
  const Notes notes{before, after};
  PrintGraph(os, *this, "", &notes);
  return os.str();
}

}  // namespace jmp::mps
