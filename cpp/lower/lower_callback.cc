// Host callbacks and the tokens that order them. jax_metal_plugin/_callbacks.py lowers JAX's callback
// primitives (debug_callback, debug_print, pure_callback, io_callback) to a custom call
// "jax_metal_python_callback" whose backend_config is the callback's id; it becomes one
// PythonCallback op. Tokens carry no data: a !stablehlo.token value is an empty bool tensor (bool[0],
// the reader's type for it, which is also how JAX's runtime passes tokens in and out of @main), and
// ordering comes from the tokens a callback consumes and produces.
#include <cstdlib>
#include <string>

#include "lower/lower_context.h"

namespace jmp::mps {

namespace {

bool IsToken(const shlo::Type& t) { return t.kind == shlo::Type::Kind::kToken; }

int NewToken(LowerContext& cx) { return cx.ConstantData(DType::kBool, {0}, {}); }

Status CreateToken(LowerContext& cx) {
  cx.Bind(0, NewToken(cx));
  return Status::Ok();
}

// after_all(tokens...): a token after all of them. Ops run in program order, so one operand is passed
// through (keeping the chain explicit) and several join in a fresh token.
Status AfterAll(LowerContext& cx) {
  if (cx.op().operands.size() == 1) {
    JMP_ASSIGN_OR_RETURN(int t, cx.In(0));
    cx.Bind(0, t);
    return Status::Ok();
  }
  cx.Bind(0, NewToken(cx));
  return Status::Ok();
}

Status PythonCallback(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  const shlo::Attr* config = op.Find("backend_config");
  if (!config || config->kind != shlo::Attr::Kind::kString || config->s.empty())
    return cx.Unsupported("needs the callback's id as its backend_config");
  char* end = nullptr;
  unsigned long long id = std::strtoull(config->s.c_str(), &end, 10);
  if (!end || *end != '\0') return cx.Unsupported("backend_config '" + config->s + "' is not a callback id");
  // Tokens come first among the operands (JAX's calling convention for callbacks).
  PythonCallbackAttrs attrs{static_cast<int64_t>(id), 0};
  std::vector<int> inputs;
  bool arrays_started = false;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    JMP_ASSIGN_OR_RETURN(int v, cx.In(i));
    if (IsToken(cx.InType(i))) {
      if (arrays_started) return cx.Unsupported("token operands must come before the arrays");
      ++attrs.token_inputs;
    } else {
      arrays_started = true;
    }
    inputs.push_back(v);
  }
  std::vector<TensorType> outputs = {TensorType{DType::kBool, {0}}};
  for (size_t i = 0; i < op.results.size(); ++i)
    if (!IsToken(cx.OutType(i))) outputs.push_back({cx.OutType(i).dtype, cx.OutType(i).shape});
  Op call = cx.NewOp(OpKind::kPythonCallback, std::move(inputs));
  call.attrs = attrs;
  std::vector<int> values = cx.EmitOp(std::move(call), outputs);
  size_t next = 1;
  for (size_t i = 0; i < op.results.size(); ++i) cx.Bind(i, IsToken(cx.OutType(i)) ? values[0] : values[next++]);
  return Status::Ok();
}

}  // namespace

void RegisterCallbackRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.create_token", &CreateToken);
  RegisterRule(r, "stablehlo.after_all", &AfterAll);
  RegisterRule(r, "custom_call:jax_metal_python_callback", &PythonCallback);
}

}  // namespace jmp::mps
