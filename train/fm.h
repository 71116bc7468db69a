// The factorization machine's second-order term (Rendle 2010), the "FM"
// half of DeepFM (Guo et al. 2017): over the F field vectors v_f (dim d) of
// one example,
//   fm = sum_{f < g} <v_f, v_g> = 0.5 * sum_k [(sum_f v_fk)^2 - sum_f v_fk^2]
// (the right-hand side is Rendle's O(F d) form), and
//   d fm / d v_fk = (sum_g v_gk) - v_fk.
// DeepFM computes it over the deep embeddings of the 26 categorical fields,
// the same vectors its MLP reads.
//
// DeepFwFM's field-weighted term (FwFM, Pan et al. 2018) gives each field
// pair its own learned weight r_fg:
//   fwfm = sum_{f < g} r_fg <v_f, v_g>,
//   d fwfm / d v_fk = sum_{g != f} r_fg v_gk,  d fwfm / d r_fg = <v_f, v_g>,
// r in pair order (0,1), (0,2), ..., (0,F-1), (1,2), ..., (F-2,F-1).
// O(F^2 d) per example (325 pairs of dim d for Criteo's 26 fields).
//
// Thread-safety: pure functions.
#ifndef PSDB_TRAIN_FM_H_
#define PSDB_TRAIN_FM_H_

#include "absl/types/span.h"

namespace psdb::train {

// out[i] = fm of example i, whose F vectors are v[i*F*d .. (i+1)*F*d)
// (field-major). REQUIRES: v.size() == n * F * d, out.size() == n.
void FmForward(absl::Span<const float> v, int n, int fields, int dim,
               absl::Span<float> out);

// dv[i, f, k] += dout[i] * (sum_g v[i, g, k] - v[i, f, k]): adds the
// gradient of sum_i dout[i] * fm_i to dv. REQUIRES: sizes as FmForward's,
// dv.size() == v.size().
void FmBackward(absl::Span<const float> v, int n, int fields, int dim,
                absl::Span<const float> dout, absl::Span<float> dv);

// F * (F - 1) / 2: the pair weights of F fields.
int FwFmPairs(int fields);

// out[i] = fwfm of example i (v as FmForward's). REQUIRES: r.size() ==
// FwFmPairs(fields), out.size() == n.
void FwFmForward(absl::Span<const float> v, absl::Span<const float> r, int n,
                 int fields, int dim, absl::Span<float> out);

// Adds the gradient of sum_i dout[i] * fwfm_i to dv (as FmBackward) and
// writes it into dr (overwritten). REQUIRES: sizes as FwFmForward's,
// dv.size() == v.size(), dr.size() == r.size().
void FwFmBackward(absl::Span<const float> v, absl::Span<const float> r, int n,
                  int fields, int dim, absl::Span<const float> dout,
                  absl::Span<float> dv, absl::Span<float> dr);

}  // namespace psdb::train

#endif  // PSDB_TRAIN_FM_H_
