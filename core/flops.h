/*
 * flops.h - the model FLOPs Megatron counts, and a run's throughput from a
 * step time.
 *
 * Megatron's formula (training.py, num_floating_point_operations): forward
 * plus backward (factor 3), FMA (2), SwiGLU FFNs (3/2 of a plain FFN's two
 * GEMMs), attention projections plus the causal core term (half the score
 * matrix), MLA's low-rank projections, MTP layers and their projections,
 * and the logits layer once per output head, over the vocabulary padded to
 * a multiple of 128 x TP.  Recompute FLOPs are not counted: this is the
 * "model TFLOP/s per GPU" a log line prints with --log-throughput, and the
 * figures of shared/facts/calibration.md (Qwen3-30B-A3B 23.01 GFLOP per
 * token at sequence 4096, Qwen3-235B-A22B 148.03, DeepSeek-V3 259.99 with
 * its MTP layer, 249.81 without; tests/test_flops.c).
 */
#ifndef MT_FLOPS_H
#define MT_FLOPS_H

#include "contract.h"
#include "kv.h"

/* Model FLOPs of one token of a training step (forward and backward) for the
 * contract's model shape (the `model` group, keys as in core/CONTRACT.md) at
 * sequence length seq and tensor parallel size tp (it pads the vocabulary).
 * 0 and *out set, or -1 when the shape lacks a required field or holds a
 * non-positive size (*out is then NAN). */
int mt_flops_per_token(const mt_kv *model, double seq, int tp, double *out);

/* Throughput of a step of config cfg under contract c that took step_s
 * seconds: model TFLOP/s per GPU and tokens/s per GPU (GBS x sequence over
 * the step time and the world size).  Either pointer may be NULL.  0, or -1
 * (both set to NAN) when step_s is not positive or the shape is unusable. */
int mt_flops_throughput(const mt_contract *c, const mt_kv *cfg, double step_s, double *tflops,
                        double *tokens);

#endif
