#include "exec/capabilities.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace jmp::exec {

DType OpDType(const mps::Graph& graph, const mps::Op& op) {
  if (op.kind == mps::OpKind::kSelect && op.inputs.size() > 1) return graph.type(op.inputs[1]).dtype;
  if (!op.inputs.empty()) return graph.type(op.inputs[0]).dtype;
  if (!op.outputs.empty()) return graph.type(op.outputs[0]).dtype;
  return DType::kF32;
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

// The rules of an environment variable, parsed once per distinct value; a malformed value is reported
// once and treated as empty.
std::vector<PairRule> RulesFromEnv(const char* variable) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::vector<PairRule>> parsed;
  const char* env = std::getenv(variable);
  if (!env || !*env) return {};
  std::string key = std::string(variable) + "=" + env;
  std::lock_guard<std::mutex> lock(mu);
  auto it = parsed.find(key);
  if (it != parsed.end()) return it->second;
  auto rules = ParseRules(env);
  if (!rules.ok()) std::cerr << "jax-metal-plugin: ignoring " << variable << ": " << rules.status().message() << "\n";
  return parsed.emplace(key, rules.ok() ? rules.value() : std::vector<PairRule>{}).first->second;
}

// The ':'-separated fields of one item, trimmed.
std::vector<std::string_view> Fields(std::string_view item) {
  std::vector<std::string_view> fields;
  while (true) {
    size_t colon = item.find(':');
    fields.push_back(Trim(item.substr(0, colon)));
    if (colon == std::string_view::npos) return fields;
    item = item.substr(colon + 1);
  }
}

// The items of a comma-separated list, trimmed, empty ones skipped.
std::vector<std::string_view> Items(std::string_view text) {
  std::vector<std::string_view> items;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

Status ParsePair(std::string_view item, const std::vector<std::string_view>& fields, mps::OpKind& kind, DType& dtype) {
  if (fields.size() < 2) return InvalidArgument("'" + std::string(item) + "' is not OpKind:dtype (e.g. Add:float16)");
  if (!ParseOpKind(fields[0], kind))
    return InvalidArgument("'" + std::string(fields[0]) + "' is not an op kind of op_kinds.def");
  if (!ParseJaxDType(fields[1], dtype))
    return InvalidArgument("'" + std::string(fields[1]) + "' is not a JAX dtype name");
  return Status::Ok();
}

bool ParseShapeClass(std::string_view name, ShapeClass& shape) {
  for (ShapeClass s : {ShapeClass::kEmpty, ShapeClass::kLarge, ShapeClass::kRank0})
    if (ShapeClassName(s) == name) {
      shape = s;
      return true;
    }
  return false;
}

bool ParseFaultMode(std::string_view name, FaultMode& mode) {
  static const std::pair<std::string_view, FaultMode> kModes[] = {
      {"corrupt", FaultMode::kCorrupt}, {"abort", FaultMode::kAbort}, {"hang", FaultMode::kHang}};
  for (const auto& [n, m] : kModes)
    if (n == name) {
      mode = m;
      return true;
    }
  return false;
}

}  // namespace

ShapeClass ShapeClassOf(const mps::Graph& graph, const mps::Op& op) {
  bool empty = false, large = false, scalars = true;
  for (const auto* ids : {&op.inputs, &op.outputs})
    for (int v : *ids)
      for (int64_t d : graph.type(v).shape) {
        empty = empty || d == 0;
        large = large || d > kLargeDimension;
      }
  for (int v : op.inputs.empty() ? op.outputs : op.inputs) scalars = scalars && graph.type(v).shape.empty();
  if (empty) return ShapeClass::kEmpty;
  if (large) return ShapeClass::kLarge;
  if (scalars && !(op.inputs.empty() && op.outputs.empty())) return ShapeClass::kRank0;
  return ShapeClass::kOther;
}

std::string_view ShapeClassName(ShapeClass shape) {
  switch (shape) {
    case ShapeClass::kOther: return "";
    case ShapeClass::kEmpty: return "empty";
    case ShapeClass::kLarge: return "large";
    case ShapeClass::kRank0: return "rank0";
  }
  return "";
}

bool PairRule::Matches(const mps::Graph& graph, const mps::Op& op) const {
  if (op.kind != kind || OpDType(graph, op) != dtype) return false;
  return shape == ShapeClass::kOther || ShapeClassOf(graph, op) == shape;
}

StatusOr<std::vector<PairRule>> ParseRules(std::string_view text) {
  std::vector<PairRule> rules;
  for (std::string_view item : Items(text)) {
    std::vector<std::string_view> fields = Fields(item);
    PairRule rule{};
    JMP_RETURN_IF_ERROR(ParsePair(item, fields, rule.kind, rule.dtype));
    bool shaped = false, moded = false;
    for (size_t i = 2; i < fields.size(); ++i) {
      if (!shaped && !moded && ParseShapeClass(fields[i], rule.shape)) {
        shaped = true;
      } else if (!moded && ParseFaultMode(fields[i], rule.mode)) {
        moded = true;
      } else {
        return InvalidArgument("'" + std::string(fields[i]) + "' in '" + std::string(item) +
                               "' is neither a shape class (empty, large, rank0) nor a fault mode (corrupt, abort, "
                               "hang), in that order");
      }
    }
    rules.push_back(rule);
  }
  return rules;
}

StatusOr<std::set<OpDTypePair>> ParsePairs(std::string_view text) {
  std::set<OpDTypePair> pairs;
  for (std::string_view item : Items(text)) {
    std::vector<std::string_view> fields = Fields(item);
    mps::OpKind kind;
    DType dtype;
    JMP_RETURN_IF_ERROR(ParsePair(item, fields, kind, dtype));
    if (fields.size() > 2) return InvalidArgument("'" + std::string(item) + "' is not OpKind:dtype (e.g. Add:float16)");
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

bool MetalAvoids(const mps::Graph& graph, const mps::Op& op) {
  const char* mode = std::getenv("JAX_METAL_CAPABILITIES");
  if (mode && std::strcmp(mode, "ignore") == 0) return false;
  for (const PairRule& rule : RulesFromEnv("JAX_METAL_AVOID"))
    if (rule.Matches(graph, op)) return true;
  return false;
}

std::vector<PairRule> InjectedFaults() { return RulesFromEnv("JAX_METAL_INJECT_FAULTS"); }

namespace {

const PairRule* MatchingRule(const std::vector<PairRule>& rules, FaultMode mode, const mps::Graph& graph,
                             const mps::Op& op) {
  for (const PairRule& rule : rules)
    if (rule.mode == mode && rule.Matches(graph, op)) return &rule;
  return nullptr;
}

// The first rule of `mode` an op of the graph matches, or null. Only the graph's own ops strike, not
// those of control-flow bodies: an injected abort or hang then stands for one row of the op table, and
// the check flags that row alone, not also the control-flow rows whose test bodies happen to use it.
const PairRule* HeldRule(const std::vector<PairRule>& rules, FaultMode mode, const mps::Graph& graph) {
  for (const mps::Op& op : graph.ops)
    if (const PairRule* rule = MatchingRule(rules, mode, graph, op)) return rule;
  return nullptr;
}

}  // namespace

mps::Graph WithFaults(const mps::Graph& graph, const std::vector<PairRule>& faults) {
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
    const bool corrupt = MatchingRule(faults, FaultMode::kCorrupt, graph, original) != nullptr;
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
        // One in t's type, as a cast of true: no encoding of each format here.
        int truth = g.AddValue(DType::kBool, t.shape), one = g.AddValue(t.dtype, t.shape);
        mps::Op constant;
        constant.kind = mps::OpKind::kConstant;
        constant.outputs = {truth};
        constant.attrs = mps::ConstantAttrs{std::vector<uint8_t>(static_cast<size_t>(t.NumElements()), 1)};
        g.ops.push_back(std::move(constant));
        mps::Op cast;
        cast.kind = mps::OpKind::kCast;
        cast.inputs = {truth};
        cast.outputs = {one};
        g.ops.push_back(std::move(cast));
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

// An executable whose graph holds an op an abort or hang rule matches: starting it (encoding it, on a
// Mac) aborts the process or blocks forever, as MPSGraph's assertions and GPU faults do.
class FaultyExecutable : public Executable {
 public:
  FaultyExecutable(std::unique_ptr<Executable> inner, const PairRule& rule) : inner_(std::move(inner)), rule_(rule) {
    device_graphs_per_run = inner_->device_graphs_per_run;
  }
  Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
    Strike();
    return inner_->Run(inputs, outputs);
  }
  void Start(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs,
             const std::vector<std::function<Status()>>& waits, std::function<void(Status)> done) override {
    Strike();
    inner_->Start(inputs, outputs, waits, std::move(done));
  }
  bool OutputsMayAliasInputs() const override { return inner_->OutputsMayAliasInputs(); }
  StatusOr<std::string> Serialize() const override { return inner_->Serialize(); }

 private:
  void Strike() const {
    const std::string pair = std::string(mps::OpKindName(rule_.kind)) + ":" + std::string(JaxDTypeName(rule_.dtype));
    if (rule_.mode == FaultMode::kAbort) {
      std::cerr << "jax-metal-plugin: injected fault (JAX_METAL_INJECT_FAULTS): " << pair
                << " aborts the process on the Metal side" << std::endl;
      std::abort();
    }
    std::cerr << "jax-metal-plugin: injected fault (JAX_METAL_INJECT_FAULTS): " << pair
              << " blocks the Metal side forever" << std::endl;
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }

  std::unique_ptr<Executable> inner_;
  PairRule rule_;
};

class FaultyExecutor : public Executor {
 public:
  FaultyExecutor(std::unique_ptr<Executor> device, std::vector<PairRule> faults)
      : device_(std::move(device)), faults_(std::move(faults)) {}
  std::string name() const override { return device_->name(); }
  StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) override { return device_->Allocate(bytes); }
  StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) override {
    JMP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> executable, device_->Compile(WithFaults(graph, faults_)));
    return Faulty(graph, std::move(executable));
  }
  // A cached program loads with the same faults as a fresh compile: the device sees the faulted graph,
  // and bytes made for the graph without them are compiled again there.
  StatusOr<std::unique_ptr<Executable>> Load(const mps::Graph& graph, std::string_view serialized) override {
    JMP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> executable, device_->Load(WithFaults(graph, faults_), serialized));
    return Faulty(graph, std::move(executable));
  }
  void AwaitStarted() override { device_->AwaitStarted(); }
  PoolStats MemoryPoolStats() override { return device_->MemoryPoolStats(); }
  size_t TrimMemoryPool() override { return device_->TrimMemoryPool(); }
  int64_t MemoryLimit() override { return device_->MemoryLimit(); }

 private:
  std::unique_ptr<Executable> Faulty(const mps::Graph& graph, std::unique_ptr<Executable> executable) const {
    for (FaultMode mode : {FaultMode::kAbort, FaultMode::kHang})
      if (const PairRule* rule = HeldRule(faults_, mode, graph))
        return std::make_unique<FaultyExecutable>(std::move(executable), *rule);
    return executable;
  }

  std::unique_ptr<Executor> device_;
  std::vector<PairRule> faults_;
};

}  // namespace

std::unique_ptr<Executor> WithInjectedFaults(std::unique_ptr<Executor> device) {
  std::vector<PairRule> faults = InjectedFaults();
  if (faults.empty() || !device) return device;
  return std::make_unique<FaultyExecutor>(std::move(device), std::move(faults));
}

}  // namespace jmp::exec
