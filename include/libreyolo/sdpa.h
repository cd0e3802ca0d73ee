/* SPDX-License-Identifier: MIT */
/*
 * Scaled dot-product attention: the `sdpa` slot and the fused-attention policy.
 *
 * Slot operands (in[] / out[] of ly_kernel_call; C-contiguous):
 *
 *  sdpa   in[0] q     f32 [B, H, Nq, d]
 *         in[1] k     f32 [B, H, Nk, d]
 *         in[2] v     f32 [B, H, Nk, dv]
 *         in[3] mask  optional; f32 (added) or u8 (boolean: non-zero adds +1.0f, zero adds
 *                     +0.0f, as transformers' eager BERT casts a bool mask to float and adds
 *                     it; it is NOT a keep/drop gate: pass an f32 mask of 0/-inf for that).
 *                     Any shape that broadcasts to [B, H, Nq, Nk] by NumPy rules (right
 *                     aligned, each dim equal or 1, up to 4 dims): [Nq, Nk],
 *                     [B or 1, H or 1, Nq, Nk], [B, 1, 1, Nk] (key padding), [Nk], ...
 *         in[4] mask2 optional, same rules; added after in[3]. Swin adds the relative
 *                     position bias and then the shifted-window mask: two roundings that
 *                     one pre-summed mask would not reproduce.
 *         params      ly_sdpa_params (libreyolo/ops.h): scale; 0 (default) means 1/sqrt(d),
 *                     computed in double and rounded to f32; otherwise (float)scale. Finite.
 *                     layout: LY_SDPA_BHND (0, default) as above, or LY_SDPA_BNHD (1): q
 *                     [B, Nq, H, d], k [B, Nk, H, d], v [B, Nk, H, dv] and out [B, Nq, H, dv],
 *                     tokens first, as a linear writes a transformer's heads (no transposes
 *                     around the attention); masks still broadcast to [B, H, Nq, Nk]. The
 *                     same numbers in either layout. An implementation (a plugin's too) that
 *                     reads only heads first declines LY_SDPA_BNHD calls in its predicate.
 *         out[0]      f32 [B, H, Nq, dv]; must not overlap the inputs.
 *
 * The numbers are defined by the portable reference, in this order, per (b, h, i):
 *   1. qs[c] = q[i][c] * scale  (f32; the scale applies to q before q.k, as timm's
 *      non-fused Attention, Swin and HF CLIP/OWL-ViT do);
 *   2. s[j] = fmaf chain over c = 0..d-1, from +0: acc = fmaf(qs[c], k[j][c], acc);
 *   3. s[j] = s[j] + mask[j], then + mask2[j] (only the masks given);
 *   4. m = max over 8 strided lanes (lane t takes j = t mod 8, in increasing j,
 *      m_t = s > m_t ? s : m_t from -inf), lanes reduced by a fixed tree
 *      (t_i = max(l_i, l_{i+4}); u_i = max(t_i, t_{i+2}); m = max(u_0, u_1));
 *   5. e[j] = ly_sdpa_expf(s[j] - m): our own polynomial with explicit fmaf (below);
 *   6. sum = 8 strided lane sums from +0 and the same tree with +; inv = 1.0f / sum;
 *   7. p[j] = e[j] * inv  (before P.V, as manual attention; not O/l at the end);
 *   8. o[c] = fmaf chain over j = 0..Nk-1, from +0: o = fmaf(p[j], v[j][c], o);
 *   9. a NaN result is stored as the canonical quiet NaN 0x7FC00000 (payloads are not
 *      part of the contract: scalar and SIMD code propagate them differently).
 * No online softmax anywhere. A fused provider that follows the same per-output
 * sequence gives the same bits for every shape and thread count; the AVX2 provider
 * ("avx2", fused) does, and `libreyolo kernels check` gates it on bit identity.
 *
 * A row whose scores are all -inf (fully masked) gives NaN, as manual attention does.
 */
#ifndef LIBREYOLO_SDPA_H
#define LIBREYOLO_SDPA_H

#include "libreyolo/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ly_sdpa_params.layout */
#define LY_SDPA_BHND 0 /* [batch, head, token, channel] */
#define LY_SDPA_BNHD 1 /* [batch, token, head, channel] */

/* Name of the AVX2+FMA fused provider (for LIBREYOLO_KERNELS and --impl). */
#define LY_SDPA_FUSED_AVX2 "avx2"

/* exp as the sdpa slot defines it (step 5 above): 0 for x < -87, otherwise
 * 2^n * P(r) with n = round(x / ln 2) and a degree-6 polynomial on
 * r in [-ln2/2, ln2/2], every step an explicit fmaf. Within 2 ulp of exp on
 * [-87, 0] (the domain softmax uses). */
LY_API float ly_sdpa_expf(float x);

/* ---- Fused-attention policy ------------------------------------------------------
 *
 * Upstream LibreYOLO gives each attention module that may run fused SDPA a plain
 * boolean `fused_attn` (off by default for families whose parity bar is a
 * byte-exact match with a manual-attention upstream; on by default for ViT/DeiT),
 * and set_fused_attention(model, enabled) sets it on every such module and
 * returns how many carry it. Graph capture for export always uses the manual math.
 *
 * Here a model's attention module embeds an ly_attention_module and runs its
 * attention through ly_sdpa_run(). Families that use SDPA unconditionally (no flag
 * upstream) call ly_kernel_dispatch_op(LY_OP_SDPA, ...) directly.
 */
typedef struct ly_attention_module {
    bool fused_attn; /* run the fused provider (when eligible) instead of the manual math */
} ly_attention_module;

/* Run one attention call for `module`: the fused path (ly_kernel_dispatch of the
 * sdpa slot: the newest eligible provider, falling back to the reference) when
 * module->fused_attn is true and the calling thread is not capturing a graph
 * (ly_kernels_capturing()); the manual reference otherwise. With the bit-exact
 * provider both give the same bits; the flag still decides which code runs. */
LY_API ly_status ly_sdpa_run(const ly_attention_module *module, const ly_kernel_call *call);

/* Set fused_attn = enabled on each of the `n` modules (NULL entries are skipped and
 * not counted) and store in *count how many carry the flag, including those whose
 * value was already `enabled` (upstream's count). `count` may be NULL; `modules`
 * may be NULL when n == 0. This is what ly_model_set_fused_attention() calls with
 * the model's modules. */
LY_API ly_status ly_attention_set_fused(ly_attention_module *const *modules, size_t n, bool enabled,
                                        int *count);

#ifdef __cplusplus
}
#endif

#endif
