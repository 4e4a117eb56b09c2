#include "exec/capabilities.h"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace jmp::exec {

DType OpDType(const mps::Graph& graph, const mps::Op& op) {
  if (op.kind == mps::OpKind::kSelect && op.inputs.size() > 1) return graph.type(op.inputs[1]).dtype;
  if (!op.inputs.empty()) return graph.type(op.inputs[0]).dtype;
  if (!op.outputs.empty()) return graph.type(op.outputs[0]).dtype;
  return DType::kF32;
}

std::string_view JaxDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "bool";
    case DType::kI8: return "int8";
    case DType::kI16: return "int16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kU8: return "uint8";
    case DType::kU16: return "uint16";
    case DType::kU32: return "uint32";
    case DType::kU64: return "uint64";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kF32: return "float32";
    case DType::kF64: return "float64";
    case DType::kC64: return "complex64";
    case DType::kC128: return "complex128";
    case DType::kI4: return "int4";
    case DType::kU4: return "uint4";
    case DType::kI2: return "int2";
    case DType::kU2: return "uint2";
    case DType::kF8E4M3FN: return "float8_e4m3fn";
    case DType::kF8E5M2: return "float8_e5m2";
    case DType::kF8E4M3FNUZ: return "float8_e4m3fnuz";
    case DType::kF8E5M2FNUZ: return "float8_e5m2fnuz";
    case DType::kF8E4M3B11FNUZ: return "float8_e4m3b11fnuz";
    case DType::kF8E4M3: return "float8_e4m3";
    case DType::kF8E3M4: return "float8_e3m4";
    case DType::kF8E8M0FNU: return "float8_e8m0fnu";
    case DType::kF4E2M1FN: return "float4_e2m1fn";
  }
  return "?";
}

bool ParseJaxDType(std::string_view name, DType& dtype) {
  for (DType d : kAllDTypes)
    if (JaxDTypeName(d) == name) {
      dtype = d;
      return true;
    }
  return false;
}

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseOpKind(std::string_view name, mps::OpKind& kind) {
  for (mps::OpKind k : mps::kAllOpKinds)
    if (mps::OpKindName(k) == name) {
      kind = k;
      return true;
    }
  return false;
}

// The pairs of an environment variable, parsed once per distinct value; a malformed value is reported
// once and treated as empty.
std::set<OpDTypePair> PairsFromEnv(const char* variable) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::set<OpDTypePair>> parsed;
  const char* env = std::getenv(variable);
  if (!env || !*env) return {};
  std::string key = std::string(variable) + "=" + env;
  std::lock_guard<std::mutex> lock(mu);
  auto it = parsed.find(key);
  if (it != parsed.end()) return it->second;
  auto pairs = ParsePairs(env);
  if (!pairs.ok()) std::cerr << "jax-metal-plugin: ignoring " << variable << ": " << pairs.status().message() << "\n";
  return parsed.emplace(key, pairs.ok() ? pairs.value() : std::set<OpDTypePair>{}).first->second;
}

std::vector<uint8_t> OnesOf(const mps::TensorType& t) {
  std::vector<uint8_t> one(ByteSize(t.dtype), 0);
  switch (t.dtype) {
    case DType::kF16: one[1] = 0x3C; break;
    case DType::kBF16:
      one[1] = 0x3F;
      one[0] = 0x80;
      break;
    case DType::kF32:
    case DType::kC64: {
      float f = 1.0f;
      std::memcpy(one.data(), &f, sizeof f);
      break;
    }
    case DType::kF64:
    case DType::kC128: {
      double d = 1.0;
      std::memcpy(one.data(), &d, sizeof d);
      break;
    }
    default: one[0] = 1; break;  // integers, little-endian; bool is negated instead
  }
  std::vector<uint8_t> data;
  data.reserve(one.size() * static_cast<size_t>(t.NumElements()));
  for (int64_t i = 0; i < t.NumElements(); ++i) data.insert(data.end(), one.begin(), one.end());
  return data;
}

}  // namespace

StatusOr<std::set<OpDTypePair>> ParsePairs(std::string_view text) {
  std::set<OpDTypePair> pairs;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      return InvalidArgument("'" + std::string(item) + "' is not OpKind:dtype (e.g. Add:float16)");
    std::string_view op = Trim(item.substr(0, colon)), dt = Trim(item.substr(colon + 1));
    mps::OpKind kind;
    DType dtype;
    if (!ParseOpKind(op, kind)) return InvalidArgument("'" + std::string(op) + "' is not an op kind of op_kinds.def");
    if (!ParseJaxDType(dt, dtype)) return InvalidArgument("'" + std::string(dt) + "' is not a JAX dtype name");
    pairs.emplace(kind, dtype);
  }
  return pairs;
}

std::string FormatPairs(const std::set<OpDTypePair>& pairs) {
  std::string out;
  for (const auto& [kind, dtype] : pairs)
    out += (out.empty() ? "" : ",") + std::string(mps::OpKindName(kind)) + ":" + std::string(JaxDTypeName(dtype));
  return out;
}

bool MetalAvoids(mps::OpKind kind, DType dtype) {
  const char* mode = std::getenv("JAX_METAL_CAPABILITIES");
  if (mode && std::strcmp(mode, "ignore") == 0) return false;
  return PairsFromEnv("JAX_METAL_AVOID").count({kind, dtype}) > 0;
}

std::set<OpDTypePair> InjectedFaults() { return PairsFromEnv("JAX_METAL_INJECT_FAULTS"); }

mps::Graph WithFaults(const mps::Graph& graph, const std::set<OpDTypePair>& faults) {
  if (faults.empty()) return graph;
  mps::Graph g;
  g.values = graph.values;
  g.inputs = graph.inputs;
  std::unordered_map<int, int> renamed;  // value -> its corrupted twin
  auto read = [&](int v) {
    auto it = renamed.find(v);
    return it == renamed.end() ? v : it->second;
  };
  for (const mps::Op& original : graph.ops) {
    mps::Op op = original;
    for (int& v : op.inputs) v = read(v);
    for (mps::Graph& sub : op.subgraphs) sub = WithFaults(sub, faults);
    const bool corrupt = faults.count({op.kind, OpDType(graph, original)}) > 0;
    std::vector<int> outputs = op.outputs;
    g.ops.push_back(std::move(op));
    if (!corrupt) continue;
    for (int v : outputs) {
      const mps::TensorType t = g.type(v);
      int bad = g.AddValue(t.dtype, t.shape);
      mps::Op fault;
      fault.location = "injected fault (JAX_METAL_INJECT_FAULTS)";
      fault.outputs = {bad};
      if (t.dtype == DType::kBool) {
        fault.kind = mps::OpKind::kNot;
        fault.inputs = {v};
      } else {
        int one = g.AddValue(t.dtype, t.shape);
        mps::Op constant;
        constant.kind = mps::OpKind::kConstant;
        constant.outputs = {one};
        constant.attrs = mps::ConstantAttrs{OnesOf(t)};
        g.ops.push_back(std::move(constant));
        fault.kind = mps::OpKind::kAdd;
        fault.inputs = {v, one};
      }
      g.ops.push_back(std::move(fault));
      renamed[v] = bad;
    }
  }
  for (int v : graph.outputs) g.outputs.push_back(read(v));
  return g;
}

namespace {

class FaultyExecutor : public Executor {
 public:
  FaultyExecutor(std::unique_ptr<Executor> device, std::set<OpDTypePair> faults)
      : device_(std::move(device)), faults_(std::move(faults)) {}
  std::string name() const override { return device_->name(); }
  StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) override { return device_->Allocate(bytes); }
  StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) override {
    return device_->Compile(WithFaults(graph, faults_));
  }
  void AwaitStarted() override { device_->AwaitStarted(); }
  PoolStats MemoryPoolStats() override { return device_->MemoryPoolStats(); }
  size_t TrimMemoryPool() override { return device_->TrimMemoryPool(); }
  int64_t MemoryLimit() override { return device_->MemoryLimit(); }

 private:
  std::unique_ptr<Executor> device_;
  std::set<OpDTypePair> faults_;
};

}  // namespace

std::unique_ptr<Executor> WithInjectedFaults(std::unique_ptr<Executor> device) {
  std::set<OpDTypePair> faults = InjectedFaults();
  if (faults.empty() || !device) return device;
  return std::make_unique<FaultyExecutor>(std::move(device), std::move(faults));
}

}  // namespace jmp::exec
