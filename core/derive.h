/*
 * derive.h - the values Megatron's validate_args derives before it checks
 * anything, applied to a parsed namespace (ctx->args).
 *
 * Start-up rules read the namespace the way upstream's checks read it: after
 * these derivations.  Every value a derivation overwrites keeps what the
 * command line said under "raw.<dest>".  The derivations (upstream line
 * numbers in derive.c):
 *   world_size, rank            from the hardware (rank 0)
 *   gtp_weight_remat_size       tensor_parallel_num_weight_shards // TP (0.19+), else 1
 *   data_parallel_size          world // (TP * PP * CP [* weight-shard factor])
 *   expert_tensor_parallel_size None -> TP
 *   recompute_granularity       "selective" under --recompute-activations
 *   global_batch_size           None -> MBS * DP
 *   virtual_pipeline_model_parallel_size
 *                               from the layout (stages // PP), from
 *                               --num-layers-per-virtual-pipeline-stage
 *                               ((L // PP) // it) or from
 *                               --num-virtual-stages-per-pipeline-rank; 1 is
 *                               None
 *   overlap_p2p_comm, align_param_gather  false without VPP
 *   sequence_parallel           false when TP == 1
 *   ffn_hidden_size, kv_channels, moe_ffn_hidden_size  Megatron's defaults
 *   num_experts                 0 -> None
 *   seq_length, encoder_seq_length  each the other's value when only one is given
 *   position_embedding_type     "rope" under --use-rotary-position-embeddings
 *   apply_rope_fusion           false unless the position embedding is rope
 */
#ifndef MT_DERIVE_H
#define MT_DERIVE_H

#include "kv.h"

/* world: the world size of the run. */
void mt_args_derive(mt_kv *args, long world);

#endif
