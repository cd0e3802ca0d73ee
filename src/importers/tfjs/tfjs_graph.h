/* SPDX-License-Identifier: MIT */
/*
 * A TF.js graph model lowered onto ly_graph (internal).
 *
 * Written for CNNs converted ONNX -> TensorFlow (onnx-tf) -> TF.js, such as
 * NanoDet: activations flow NCHW with every NHWC op wrapped in Transposes,
 * convolutions are Pad -> Conv2D -> Add(bias) -> LeakyRelu, shapes come from
 * constant sub-graphs. The lowering tracks, for each TensorFlow value, a graph
 * value in NCHW plus a permutation (logical axis i is physical axis perm[i]),
 * so Transposes cost nothing; a physical transpose is inserted only where an
 * op needs another layout. Pads are folded into the padding of the Conv2D or
 * pool that reads them, a bias Add, an activation and an elementwise Add are
 * folded into the convolution that feeds them when nothing else reads its
 * output, and constant sub-graphs (SparseToDense, integer Adds) are folded.
 *
 * Ops: Placeholder, Const, Identity, Transpose, Pad, PadV2, Conv2D,
 * DepthwiseConv2dNative, Add, AddV2, BiasAdd, Relu, LeakyRelu, Sigmoid,
 * MaxPool, AvgPool, ResizeBilinear, ResizeNearestNeighbor (integer factors),
 * ConcatV2, Split, SplitV, Reshape, SparseToDense (constant). Anything else,
 * or a supported op in a form the runtime cannot run exactly (asymmetric
 * padding, broadcasting between computed tensors, a concat or split off the
 * channel axis, a dynamic shape), is LY_E_UNSUPPORTED naming the node and op:
 * never a silently different graph.
 *
 * Graph outputs are the signature's outputs in natural order of their names
 * ("Identity", "Identity_1", ..., "Identity_10"), named without ":0", laid out
 * as TensorFlow has them (row-major in the TF axis order).
 */
#ifndef LY_MODELS_NANODET_TFJS_GRAPH_H
#define LY_MODELS_NANODET_TFJS_GRAPH_H

#include "importers/tfjs/tfjs.h"
#include "graph/graph.h"

/* The graph has one input per Placeholder reached from the outputs (in the
 * model's node order), named after it. */
ly_status ly_tfjs_lower(const ly_tfjs_model *m, ly_graph **out);

#endif
