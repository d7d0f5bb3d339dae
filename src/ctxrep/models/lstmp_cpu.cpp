// The time loop of LSTMP layers (LSTMs whose output is projected, Sak et al. 2014) on CPU, fp32:
// forward and backward, the matmuls that are not sequential in time (the input matmul and the
// weight gradients) included, each over all steps at once. Built and wrapped by lstmp_cpu.py.
//
// Per step t, with gates laid out [i f g o] as in torch.nn.LSTM:
//     a_t = x_gates_t + W_hh h_{t-1}                  (x_gates = W_ih x + b, all steps in one matmul)
//     i, f, o = sigmoid(a_i, a_f, a_o),  g = tanh(a_g)
//     c_t = f * c_{t-1} + i * g,   m_t = o * tanh(c_t),   h_t = W_hr m_t
// torch.nn.LSTM(proj_size=P) runs the same step as a chain of small ATen calls, each with its own
// dispatch and thread hand-off; at a batch of 16 that overhead, not the matmuls, sets the speed.
// Here the step is two matmuls and one plain loop.
//
// Every entry point takes a list of independent layers (the biLM passes layer l of its forward
// and of its backward LM) and runs them concurrently, one per thread: a step's matmuls on 16 rows
// are too small to split across cores efficiently, and one thread per layer needs no hand-off
// inside the loop at all (ATen and MKL run single-threaded inside a parallel region).
//
// Registered as torch operators (torch.ops.ctxrep_lstmp.forward / backward), not as a Python
// module: ATen's headers alone compile in a third of the time torch/extension.h takes.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

// contiguous: the loops index raw pointers; inputs and incoming gradients are copied step-major
// anyway, so they only need to be float32 CPU tensors of the right rank.
void check(const at::Tensor& t, int64_t dim, const char* name, bool contiguous = true) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kFloat && t.dim() == dim &&
                  (!contiguous || t.is_contiguous()),
              "lstmp_cpu: ", name, " must be a ", contiguous ? "contiguous " : "", dim, "-d float32 CPU tensor");
}

// exp(-x) for x < -88 is inf, and fast math's division (reciprocal + a Newton step) turns
// 1 / (1 + inf) into NaN where IEEE gives 0: a saturated gate must saturate. Beyond |x| = 80 the
// clamp changes the result by less than 2e-35.
inline float sigmoid(float x) { return 1.f / (1.f + std::exp(-std::min(std::max(x, -80.f), 80.f))); }

// One row of one step, forward: the gates' pre-activations in (activated on return), c_{t-1} ->
// c_t, tanh(c_t), m_t. Separate restrict pointers per gate, so that the compiler vectorises it.
void forward_cells(float* __restrict__ i_, float* __restrict__ f_, float* __restrict__ g_, float* __restrict__ o_,
                   const float* __restrict__ c_prev, float* __restrict__ c, float* __restrict__ tc,
                   float* __restrict__ m, int64_t C) {
  for (int64_t j = 0; j < C; ++j) {
    const float i = sigmoid(i_[j]), f = sigmoid(f_[j]), g = std::tanh(g_[j]), o = sigmoid(o_[j]);
    i_[j] = i, f_[j] = f, g_[j] = g, o_[j] = o;
    c[j] = f * c_prev[j] + i * g;
    tc[j] = std::tanh(c[j]);
    m[j] = o * tc[j];
  }
}

// One row of one step, backward: activated gates, c_{t-1}, tanh(c_t), dm_t = dL/dm_t and
// dc = dL/dc_t from step t + 1 (updated in place to dL/dc_{t-1}) -> the gates' gradients.
void backward_cells(const float* __restrict__ i_, const float* __restrict__ f_, const float* __restrict__ g_,
                    const float* __restrict__ o_, const float* __restrict__ c_prev, const float* __restrict__ tc,
                    const float* __restrict__ dm, float* __restrict__ dc, float* __restrict__ di,
                    float* __restrict__ df, float* __restrict__ dg, float* __restrict__ do_, int64_t C) {
  for (int64_t j = 0; j < C; ++j) {
    const float i = i_[j], f = f_[j], g = g_[j], o = o_[j];
    const float dcell = dc[j] + dm[j] * o * (1.f - tc[j] * tc[j]);
    di[j] = dcell * g * i * (1.f - i);
    df[j] = dcell * c_prev[j] * f * (1.f - f);
    dg[j] = dcell * i * (1.f - g * g);
    do_[j] = dm[j] * tc[j] * o * (1.f - o);
    dc[j] = dcell * f;
  }
}

// Runs body(k) for k in [0, n), concurrently where there are threads for it. Autograd's mode is
// per thread and on by default in a worker; the loops only compute, so it is off in every one.
template <typename F>
void for_each_layer(int64_t n, const F& body) {
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    at::NoGradGuard no_grad;
    for (int64_t k = begin; k < end; ++k) body(k);
  });
}

// One layer. A holds x_gates on entry and the activated gates on return.
void forward_layer(at::Tensor A, const at::Tensor& w_hh, const at::Tensor& w_hr, at::Tensor H, at::Tensor Cs,
                   at::Tensor TC, at::Tensor M) {
  const int64_t T = A.size(0), B = A.size(1), G = A.size(2), C = G / 4;
  const auto w_hh_t = w_hh.t(), w_hr_t = w_hr.t();
  for (int64_t t = 0; t < T; ++t) {
    auto a = A[t];
    if (t > 0) a.addmm_(H[t - 1], w_hh_t);  // h_0 = 0
    float* gates = a.data_ptr<float>();
    const float* c_prev = Cs[t].data_ptr<float>();
    float* c = Cs[t + 1].data_ptr<float>();
    float* tc = TC[t].data_ptr<float>();
    float* m = M[t].data_ptr<float>();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t row = b * C;
      forward_cells(gates + b * G, gates + b * G + C, gates + b * G + 2 * C, gates + b * G + 3 * C, c_prev + row,
                    c + row, tc + row, m + row, C);
    }
    auto h = H[t];
    at::mm_out(h, M[t], w_hr_t);
  }
}

// One layer's recurrence backward; dH_total holds dH on entry.
void backward_layer(at::Tensor dH_total, const at::Tensor& A, const at::Tensor& Cs, const at::Tensor& TC,
                    const at::Tensor& w_hh, const at::Tensor& w_hr, at::Tensor dA) {
  const int64_t T = A.size(0), B = A.size(1), G = A.size(2), C = G / 4;
  auto dm = at::empty({B, C}, A.options());
  auto dc = at::zeros({B, C}, A.options());  // gradient at c_t from step t + 1
  float* dc_ = dc.data_ptr<float>();
  for (int64_t t = T - 1; t >= 0; --t) {
    auto dh = dH_total[t];
    if (t < T - 1) dh.addmm_(dA[t + 1], w_hh);
    at::mm_out(dm, dh, w_hr);
    const float* a = A[t].data_ptr<float>();
    const float* c_prev = Cs[t].data_ptr<float>();
    const float* tc = TC[t].data_ptr<float>();
    const float* dm_ = dm.data_ptr<float>();
    float* da = dA[t].data_ptr<float>();
    for (int64_t b = 0; b < B; ++b) {
      const float* g = a + b * G;
      float* d = da + b * G;
      const int64_t row = b * C;
      backward_cells(g, g + C, g + 2 * C, g + 3 * C, c_prev + row, tc + row, dm_ + row, dc_ + row, d, d + C,
                     d + 2 * C, d + 3 * C, C);
    }
  }
}

}  // namespace

// Per layer k: x (B, T, I), w_ih (4C, I), w_hh (4C, P), w_hr (P, C), bias (4C) = b_ih + b_hh ->
//   X (T, B, I) the input step-major, H (T, B, P) projected states, A (T, B, 4C) activated gates,
//   Cs (T + 1, B, C) cells (Cs[0] = 0), TC (T, B, C) = tanh(c), M (T, B, C) = o * tanh(c):
//   flat, 6 per layer; all but H are what backward needs.
// Each layer's work, its input matmul over all steps included, runs on one thread: a matmul of
// 400 rows gains little from a second core, and two layers at once use both fully.
std::vector<at::Tensor> lstmp_forward(at::TensorList x, at::TensorList w_ih, at::TensorList w_hh,
                                      at::TensorList w_hr, at::TensorList bias) {
  const size_t n = x.size();
  TORCH_CHECK(w_ih.size() == n && w_hh.size() == n && w_hr.size() == n && bias.size() == n,
              "lstmp_cpu: one x, w_ih, w_hh, w_hr and bias per layer");
  for (size_t k = 0; k < n; ++k) {
    check(x[k], 3, "x", /*contiguous=*/false);
    check(w_ih[k], 2, "w_ih");
    check(w_hh[k], 2, "w_hh");
    check(w_hr[k], 2, "w_hr");
    check(bias[k], 1, "bias");
    const int64_t G = w_ih[k].size(0), C = G / 4, P = w_hr[k].size(0);
    TORCH_CHECK(G == 4 * C && x[k].size(2) == w_ih[k].size(1) && w_hh[k].size(0) == G && w_hh[k].size(1) == P &&
                    w_hr[k].size(1) == C && bias[k].size(0) == G,
                "lstmp_cpu: shapes disagree");
  }
  std::vector<at::Tensor> out(6 * n);
  for_each_layer(n, [&](int64_t k) {
    const int64_t B = x[k].size(0), T = x[k].size(1), I = x[k].size(2), G = w_ih[k].size(0), C = G / 4,
                  P = w_hr[k].size(0);
    const auto options = w_ih[k].options();
    auto X = x[k].transpose(0, 1).contiguous();  // each step's rows contiguous
    auto A = at::addmm(bias[k], X.view({T * B, I}), w_ih[k].t()).view({T, B, G});
    auto H = at::empty({T, B, P}, options), Cs = at::zeros({T + 1, B, C}, options);
    auto TC = at::empty({T, B, C}, options), M = at::empty({T, B, C}, options);
    forward_layer(A, w_hh[k], w_hr[k], H, Cs, TC, M);
    out[6 * k] = X, out[6 * k + 1] = H, out[6 * k + 2] = A, out[6 * k + 3] = Cs, out[6 * k + 4] = TC,
    out[6 * k + 5] = M;
  });
  return out;
}

// Per layer k: dH (B, T, P), the loss's gradient at each output h_t, and what forward saved
// (X, H, A, Cs, TC, M) -> dx (T, B, I), dW_ih, dW_hh, dW_hr, db: flat, 5 per layer.
//   the loop:   dA_t (gradient at the gate pre-activations), and dH_total_t = dH_t + W_hh^T dA_{t+1}
//   then:       dx = dA W_ih,  dW_ih = dA^T X,  dW_hh = dA^T H_{t-1},  dW_hr = dH_total^T M,
//               db = sum dA                       one matmul each, over all steps at once
std::vector<at::Tensor> lstmp_backward(at::TensorList dH, at::TensorList saved, at::TensorList w_ih,
                                       at::TensorList w_hh, at::TensorList w_hr) {
  const size_t n = dH.size();
  TORCH_CHECK(saved.size() == 6 * n && w_ih.size() == n && w_hh.size() == n && w_hr.size() == n,
              "lstmp_cpu: one dH, saved forward (6 tensors), w_ih, w_hh and w_hr per layer");
  for (size_t k = 0; k < n; ++k) {
    check(dH[k], 3, "dH", /*contiguous=*/false);
    for (size_t i = 0; i < 6; ++i) check(saved[6 * k + i], 3, "a saved tensor");
  }
  std::vector<at::Tensor> out(5 * n);
  for_each_layer(n, [&](int64_t k) {
    const auto &X = saved[6 * k], &H = saved[6 * k + 1], &A = saved[6 * k + 2], &Cs = saved[6 * k + 3],
               &TC = saved[6 * k + 4], &M = saved[6 * k + 5];
    const int64_t T = A.size(0), B = A.size(1), G = A.size(2), I = X.size(2), P = H.size(2), C = G / 4;
    // dH_t, to which the loop adds W_hh^T dA_{t+1}: always a copy, since contiguous() would hand
    // back the caller's own gradient where it is already step-major, and the loop writes in place
    auto dH_total = at::empty({T, B, P}, dH[k].options());
    dH_total.copy_(dH[k].transpose(0, 1));
    auto dA = at::empty_like(A);
    backward_layer(dH_total, A, Cs, TC, w_hh[k], w_hr[k], dA);
    const auto dA_rows = dA.view({T * B, G});
    out[5 * k] = at::mm(dA_rows, w_ih[k]).view({T, B, I});
    out[5 * k + 1] = at::mm(dA_rows.t(), X.view({T * B, I}));
    // dW_hh pairs dA_t with h_{t-1}: the states one step behind (h_0 = 0 adds nothing)
    out[5 * k + 2] = T > 1 ? at::mm(dA_rows.narrow(0, B, (T - 1) * B).t(), H.narrow(0, 0, T - 1).view({(T - 1) * B, P}))
                           : at::zeros_like(w_hh[k]);
    out[5 * k + 3] = at::mm(dH_total.view({T * B, P}).t(), M.view({T * B, C}));
    out[5 * k + 4] = dA_rows.sum(0);
  });
  return out;
}

TORCH_LIBRARY(ctxrep_lstmp, m) {
  m.def("forward", &lstmp_forward);
  m.def("backward", &lstmp_backward);
}
