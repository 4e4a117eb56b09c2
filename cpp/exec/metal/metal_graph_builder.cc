#include "exec/metal/metal_graph_builder.h"

#include <cstdio>
#include <string>
#include <vector>

#include "mps/op_attrs.h"

namespace jmp::exec::metal {

DataType DataTypeOf(DType t) {
  switch (t) {
#define JMP_DTYPE(name, mlir, jax, bytes, bits, cls, pjrt, vhlo, metal, msl, host) \
  case DType::k##name: return DataType::k##metal;
#include "support/dtype.def"
  }
  return DataType::kInvalid;
}

StatusOr<DataType> ToMPS(DType t, const mps::Op* op) {
  const DataType d = DataTypeOf(t);
  if (d != DataType::kInvalid) return d;
  const std::string where = op ? std::string(mps::OpKindName(op->kind)) : "argument";
  if (IsNarrow(t))
    return Internal(where + ": " + std::string(DTypeName(t)) +
                    " reached the Metal executor (the lowering rewrites narrow types)");
  return Unimplemented(where + ": " + std::string(JaxDTypeName(t)) + " is not supported by MPSGraph");
}

Shape ShapeOf(const mps::TensorType& t) {
  if (t.shape.empty()) return Shape{1};
  return t.shape;
}

ShapedType ShapedTypeOf(const mps::TensorType& t) { return ShapedType{ShapeOf(t), DataTypeOf(t.dtype)}; }

namespace {

std::string ShapeText(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

class Builder {
 public:
  explicit Builder(Graph& graph) : G(graph) {}

  StatusOr<Tensors> Build(const mps::Graph& g, const Tensors& params) {
    if (params.size() != g.inputs.size()) return Internal("Metal graph: parameter count differs from the graph's");
    std::vector<Tensor*> values(g.values.size(), nullptr);
    for (size_t i = 0; i < g.inputs.size(); ++i) values[static_cast<size_t>(g.inputs[i])] = params[i];
    for (const mps::Op& op : g.ops) {
      Tensors in;
      for (int v : op.inputs) {
        in.push_back(values[static_cast<size_t>(v)]);
        if (!in.back())
          return Internal(std::string(mps::OpKindName(op.kind)) + " reads a zero-element value on Metal " +
                          "(placement keeps such ops on the host)" + (op.location.empty() ? "" : " at " + op.location));
      }
      JMP_ASSIGN_OR_RETURN(Tensors out, Emit(g, op, in));
      if (out.size() != op.outputs.size())
        return Internal(std::string(mps::OpKindName(op.kind)) + ": MPSGraph gave " + std::to_string(out.size()) +
                        " results where the op has " + std::to_string(op.outputs.size()));
      for (size_t i = 0; i < op.outputs.size(); ++i) {
        if (mismatch_.ok() && out[i]) mismatch_ = CheckInferred(op, g.type(op.outputs[i]), out[i]);
        values[static_cast<size_t>(op.outputs[i])] = out[i];
      }
    }
    Tensors outputs;
    for (int v : g.outputs) outputs.push_back(values[static_cast<size_t>(v)]);
    return outputs;
  }

  // The first call whose inferred type is not the op graph's. It is reported after compiling, so that a
  // refusal of MPSGraph's own, which explains it, comes first.
  const Status& mismatch() const { return mismatch_; }

 private:
  // MPSGraph infers each result's type from the call; it must be the op graph's.
  Status CheckInferred(const mps::Op& op, const mps::TensorType& want, Tensor* got) {
    const ShapedType expected = ShapedTypeOf(want);
    const Shape shape = G.shapeOf(got);
    const DataType dtype = G.dataTypeOf(got);
    if (shape == expected.shape && dtype == expected.dataType) return Status::Ok();
    return Internal(std::string(mps::OpKindName(op.kind)) + " (" + std::string(mps::OpKindSelector(op.kind)) +
                    "): MPSGraph inferred shape " + ShapeText(shape) + " dtype 0x" + Hex(dtype) +
                    " where the op graph has " + want.ToString() + (op.location.empty() ? "" : " at " + op.location));
  }
  static std::string Hex(DataType d) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%x", static_cast<unsigned>(d));
    return buf;
  }

  // Zeros of the op's result types: what a branch whose body failed to build returns, so that both
  // branches still return as many tensors, alike (the failure is reported once the call returns).
  Tensors Placeholders(const mps::Graph& g, const mps::Op& op) {
    Tensors out;
    for (int v : op.outputs) out.push_back(G.constantWithScalar(0, ShapeOf(g.type(v)), DataTypeOf(g.type(v).dtype)));
    return out;
  }

  StatusOr<Tensors> Emit(const mps::Graph& g, const mps::Op& op, const Tensors& in);

  Graph& G;
  Status mismatch_;
};

ScatterMode ScatterModeOf(mps::ScatterMode mode) {
  using S = mps::ScatterMode;
  switch (mode) {
    case S::kAdd: return ScatterMode::kAdd;
    case S::kSub: return ScatterMode::kSub;
    case S::kMul: return ScatterMode::kMul;
    case S::kDiv: return ScatterMode::kDiv;
    case S::kMin: return ScatterMode::kMin;
    case S::kMax: return ScatterMode::kMax;
    case S::kSet: return ScatterMode::kSet;
  }
  return ScatterMode::kSet;
}

int64_t Axis(const mps::Op& op) { return op.Attrs<mps::AxisAttrs>().axis; }
const Shape& Axes(const mps::Op& op) { return op.Attrs<mps::AxesAttrs>().axes; }

Pooling4DOpDescriptor Pooling(const mps::Op& op, bool include_zero_pad) {
  const mps::Pool4DAttrs& p = op.Attrs<mps::Pool4DAttrs>();
  Pooling4DOpDescriptor d;
  d.kernelSizes = p.window;
  d.strides = p.strides;
  d.dilationRates = {1, 1, 1, 1};
  for (size_t i = 0; i < p.pad_low.size() && i < p.pad_high.size(); ++i) {
    d.paddingValues.push_back(p.pad_low[i]);
    d.paddingValues.push_back(p.pad_high[i]);
  }
  d.paddingStyle = PaddingStyle::kExplicit;
  d.includeZeroPadToAverage = include_zero_pad;
  return d;
}

StatusOr<Tensors> Builder::Emit(const mps::Graph& g, const mps::Op& op, const Tensors& in) {
  using K = mps::OpKind;
  const mps::TensorType& out = g.type(op.outputs.at(0));
  JMP_ASSIGN_OR_RETURN(DataType dt, ToMPS(out.dtype, &op));
  switch (op.kind) {
    case K::kConstant: {
      // An empty constant makes nothing MPSGraph would take; only an empty result can read it.
      if (out.NumElements() == 0) return Tensors{nullptr};
      const std::vector<uint8_t>& data = op.Attrs<mps::ConstantAttrs>().data;
      return Tensors{G.constantWithData(data.data(), data.size(), ShapeOf(out), dt)};
    }
    case K::kCoordinateAlongAxis:
      return Tensors{G.castTensor(G.coordinateAlongAxis(Axis(op), ShapeOf(out)), dt)};
      // The uniform rows: one generated call each.
#define JMP_MPS_UNARY(Name, macos, selector, domain) \
  case K::k##Name: return Tensors{G.selector(in.at(0))};
#define JMP_MPS_BINARY(Name, macos, primary, secondary, domain) \
  case K::k##Name: return Tensors{G.primary(in.at(0), in.at(1))};
#include "mps/op_kinds.def"
      // Placement never sends these here (exec/placement.cc); reaching one is a placement bug.
#define JMP_HOST_OP(Name, domain) case K::k##Name:
#include "mps/op_kinds.def"
      return Internal(std::string(mps::OpKindName(op.kind)) + " is host-only but was placed on Metal");
    case K::kMetalKernel: return Internal("a Metal kernel must be a segment of its own (exec/placement.cc)");
    case K::kMatMul: return Tensors{G.matrixMultiplicationWithPrimaryTensor(in.at(0), in.at(1))};
    case K::kSelect: return Tensors{G.selectWithPredicateTensor(in.at(0), in.at(1), in.at(2))};
    case K::kClamp: return Tensors{G.clampWithTensor(in.at(0), in.at(1), in.at(2))};
    case K::kMultiplyAdd:
      return Tensors{G.additionWithPrimaryTensor(G.multiplicationWithPrimaryTensor(in.at(0), in.at(1)), in.at(2))};
    case K::kCast: return Tensors{G.castTensor(in.at(0), dt)};
    case K::kReinterpretCast: return Tensors{G.reinterpretCastTensor(in.at(0), dt)};
    case K::kReshape: return Tensors{G.reshapeTensor(in.at(0), ShapeOf(out))};
    case K::kTranspose: return Tensors{G.transposeTensor(in.at(0), op.Attrs<mps::PermutationAttrs>().permutation)};
    case K::kBroadcast: return Tensors{G.broadcastTensor(in.at(0), ShapeOf(out))};
    case K::kSlice: {
      const mps::SliceAttrs& a = op.Attrs<mps::SliceAttrs>();
      return Tensors{G.sliceTensor(in.at(0), a.starts, a.ends, a.strides)};
    }
    case K::kConcat: return Tensors{G.concatTensors(in, Axis(op))};
    case K::kPad: {
      const mps::PadAttrs& a = op.Attrs<mps::PadAttrs>();
      return Tensors{G.padTensor(in.at(0), PaddingMode::kConstant, a.low, a.high, a.value)};
    }
    case K::kReverse: return Tensors{G.reverseTensor(in.at(0), Axes(op))};
    case K::kReductionSum: return Tensors{G.reductionSumWithTensor(in.at(0), Axes(op))};
    case K::kReductionProduct: return Tensors{G.reductionProductWithTensor(in.at(0), Axes(op))};
    case K::kReductionMaximum: return Tensors{G.reductionMaximumPropagateNaNWithTensor(in.at(0), Axes(op))};
    case K::kReductionMinimum: return Tensors{G.reductionMinimumPropagateNaNWithTensor(in.at(0), Axes(op))};
    case K::kReductionAnd: return Tensors{G.reductionAndWithTensor(in.at(0), Axes(op))};
    case K::kReductionOr: return Tensors{G.reductionOrWithTensor(in.at(0), Axes(op))};
    case K::kReductionArgMaximum: return Tensors{G.reductionArgMaximumWithTensor(in.at(0), Axis(op))};
    case K::kReductionArgMinimum: return Tensors{G.reductionArgMinimumWithTensor(in.at(0), Axis(op))};
    case K::kFFT: {
      const mps::FFTAttrs& a = op.Attrs<mps::FFTAttrs>();
      FFTDescriptor d;
      d.inverse = a.inverse;
      d.scalingMode = a.inverse ? FFTScalingMode::kSize : FFTScalingMode::kNone;
      return Tensors{G.fastFourierTransformWithTensor(in.at(0), a.axes, d)};
    }
    case K::kRealToHermiteanFFT:
      return Tensors{G.realToHermiteanFFTWithTensor(in.at(0), op.Attrs<mps::FFTAttrs>().axes, FFTDescriptor{})};
    case K::kHermiteanToRealFFT: {
      FFTDescriptor d;
      d.inverse = true;
      d.scalingMode = FFTScalingMode::kSize;
      d.roundToOddHermitean = !out.shape.empty() && out.shape.back() % 2 == 1;
      return Tensors{G.HermiteanToRealFFTWithTensor(in.at(0), op.Attrs<mps::FFTAttrs>().axes, d)};
    }
    case K::kSort: {
      const mps::SortAttrs& a = op.Attrs<mps::SortAttrs>();
      return Tensors{G.sortWithTensor(in.at(0), a.axis, a.descending)};
    }
    case K::kArgSort: {
      const mps::SortAttrs& a = op.Attrs<mps::SortAttrs>();
      return Tensors{G.argSortWithTensor(in.at(0), a.axis, a.descending)};
    }
    case K::kTopK: return G.topKWithSourceTensor(in.at(0), static_cast<uint64_t>(op.Attrs<mps::TopKAttrs>().k));
    case K::kCumulativeSum:
    case K::kCumulativeProduct:
    case K::kCumulativeMaximum:
    case K::kCumulativeMinimum: {
      const mps::CumulativeAttrs& a = op.Attrs<mps::CumulativeAttrs>();
      auto call = op.kind == K::kCumulativeSum       ? &Graph::cumulativeSumWithTensor
                  : op.kind == K::kCumulativeProduct ? &Graph::cumulativeProductWithTensor
                  : op.kind == K::kCumulativeMaximum ? &Graph::cumulativeMaximumWithTensor
                                                     : &Graph::cumulativeMinimumWithTensor;
      return Tensors{(G.*call)(in.at(0), a.axis, a.exclusive, a.reverse)};
    }
    case K::kGatherAlongAxis: return Tensors{G.gatherAlongAxis(Axis(op), in.at(0), in.at(1))};
    case K::kGatherND:
      return Tensors{G.gatherNDWithUpdatesTensor(in.at(0), in.at(1),
                                                 static_cast<uint64_t>(op.Attrs<mps::GatherNDAttrs>().batch_dims))};
    case K::kScatterND:
      return Tensors{G.scatterNDWithDataTensor(in.at(0), in.at(1), in.at(2), 0,
                                               ScatterModeOf(op.Attrs<mps::ScatterAttrs>().mode))};
    case K::kScatterAlongAxis: {
      const mps::ScatterAttrs& a = op.Attrs<mps::ScatterAttrs>();
      return Tensors{G.scatterAlongAxis(a.axis, in.at(0), in.at(1), in.at(2), ScatterModeOf(a.mode))};
    }
    case K::kConv2D: {
      const mps::Conv2DAttrs& a = op.Attrs<mps::Conv2DAttrs>();
      Convolution2DOpDescriptor d;
      d.strideInX = static_cast<uint64_t>(a.strides.at(1));
      d.strideInY = static_cast<uint64_t>(a.strides.at(0));
      d.dilationRateInX = static_cast<uint64_t>(a.dilations.at(1));
      d.dilationRateInY = static_cast<uint64_t>(a.dilations.at(0));
      d.groups = static_cast<uint64_t>(a.groups);
      d.paddingLeft = static_cast<uint64_t>(a.pad_low.at(1));
      d.paddingRight = static_cast<uint64_t>(a.pad_high.at(1));
      d.paddingTop = static_cast<uint64_t>(a.pad_low.at(0));
      d.paddingBottom = static_cast<uint64_t>(a.pad_high.at(0));
      d.paddingStyle = PaddingStyle::kExplicit;
      d.dataLayout = TensorNamedDataLayout::kNHWC;
      d.weightsLayout = TensorNamedDataLayout::kHWIO;
      return Tensors{G.convolution2DWithSourceTensor(in.at(0), in.at(1), d)};
    }
    case K::kMaxPool4D: return Tensors{G.maxPooling4DWithSourceTensor(in.at(0), Pooling(op, false))};
    case K::kAvgPool4D: return Tensors{G.avgPooling4DWithSourceTensor(in.at(0), Pooling(op, true))};
    case K::kMaxPool4DGradient:
      return Tensors{G.maxPooling4DGradientWithGradientTensor(in.at(0), in.at(1), Pooling(op, false))};
    case K::kWhile: {
      const mps::Graph& cond = op.subgraphs.at(0);
      const mps::Graph& body = op.subgraphs.at(1);
      Status failure;
      Tensors r = G.whileWithInitialInputs(
          in,
          [&](const Tensors& inputs, Tensors& results) -> Tensor* {
            results = inputs;
            auto c = Build(cond, inputs);
            if (!c.ok()) {
              failure = c.status();
              return G.constantWithScalar(0, Shape{1}, DataType::kBool);
            }
            return G.reshapeTensor(c->at(0), Shape{1});
          },
          [&](const Tensors& args) -> Tensors {
            auto b = Build(body, args);
            if (!b.ok()) {
              failure = b.status();
              return args;
            }
            return *b;
          });
      JMP_RETURN_IF_ERROR(failure);
      return r;
    }
    case K::kIf: {
      const Tensors params(in.begin() + 1, in.end());
      Status failure;
      auto branch = [&](const mps::Graph& sub) {
        return [&, sub_graph = &sub]() -> Tensors {
          auto t = Build(*sub_graph, params);
          if (t.ok()) return *t;
          failure = t.status();
          return Placeholders(g, op);
        };
      };
      Tensors r = G.ifWithPredicateTensor(in.at(0), branch(op.subgraphs.at(0)), branch(op.subgraphs.at(1)));
      JMP_RETURN_IF_ERROR(failure);
      return r;
    }
  }
  return Internal("unknown op kind");
}

}  // namespace

StatusOr<Tensors> BuildGraph(Graph& graph, const mps::Graph& g, const Tensors& params, Status* mismatch) {
  Builder builder(graph);
  StatusOr<Tensors> built = builder.Build(g, params);
  *mismatch = builder.mismatch();
  return built;
}

}  // namespace jmp::exec::metal
