// The factorization machine's second-order term (Rendle 2010), the "FM"
// half of DeepFM (Guo et al. 2017): over the F field vectors v_f (dim d) of
// one example,
//   fm = sum_{f < g} <v_f, v_g> = 0.5 * sum_k [(sum_f v_fk)^2 - sum_f v_fk^2]
// (the right-hand side is Rendle's O(F d) form), and
//   d fm / d v_fk = (sum_g v_gk) - v_fk.
// DeepFM computes it over the deep embeddings of the 26 categorical fields,
// the same vectors its MLP reads.
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

}  // namespace psdb::train

#endif  // PSDB_TRAIN_FM_H_
