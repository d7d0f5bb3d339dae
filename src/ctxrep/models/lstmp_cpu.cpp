// The time loop of one LSTMP layer (an LSTM whose output is projected, Sak et al. 2014) on CPU,
// fp32: forward, and the backward pass of the recurrence. Built and wrapped by lstmp_cpu.py,
// which also does the work that is not sequential in time (the input and weight-gradient
// matmuls over all steps at once).
//
// Per step t, with gates laid out [i f g o] as in torch.nn.LSTM:
//     a_t = x_gates_t + W_hh h_{t-1}                  (x_gates_t = W_ih x_t + b, computed outside)
//     i, f, o = sigmoid(a_i, a_f, a_o),  g = tanh(a_g)
//     c_t = f * c_{t-1} + i * g,   m_t = o * tanh(c_t),   h_t = W_hr m_t
// torch.nn.LSTM(proj_size=P) runs the same step as a chain of small ATen calls, each with its own
// dispatch and thread hand-off; at a batch of 16 that overhead, not the matmuls, sets the speed.
// Here the step is 7 calls (the two matmuls and the vectorised activations) and one plain loop.

#include <ATen/Parallel.h>
#include <torch/extension.h>

#include <vector>

namespace {

void check(const at::Tensor& t, int64_t dim, const char* name) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.dim() == dim,
              "lstmp_cpu: ", name, " must be a contiguous ", dim, "-d float32 CPU tensor");
}

}  // namespace

// x_gates (T, B, 4C), w_hh (4C, P), w_hr (P, C) ->
//   H (T, B, P) projected states, A (T, B, 4C) activated gates, Cs (T + 1, B, C) cells (Cs[0] = 0),
//   M (T, B, C) = o * tanh(c): what backward needs.
// A is x_gates itself, overwritten step by step (the caller made it for this call only): adding
// the recurrent term in place saves a copy per step.
std::vector<at::Tensor> lstmp_forward(const at::Tensor& x_gates, const at::Tensor& w_hh, const at::Tensor& w_hr) {
  check(x_gates, 3, "x_gates");
  check(w_hh, 2, "w_hh");
  check(w_hr, 2, "w_hr");
  const int64_t T = x_gates.size(0), B = x_gates.size(1), G = x_gates.size(2), C = G / 4, P = w_hr.size(0);
  TORCH_CHECK(G == 4 * C && w_hh.size(0) == G && w_hh.size(1) == P && w_hr.size(1) == C,
              "lstmp_cpu: shapes disagree");
  auto A = x_gates;
  auto Cs = at::zeros({T + 1, B, C}, x_gates.options());
  auto M = at::empty({T, B, C}, x_gates.options());
  auto H = at::empty({T, B, P}, x_gates.options());
  const auto w_hh_t = w_hh.t(), w_hr_t = w_hr.t();
  for (int64_t t = 0; t < T; ++t) {
    auto a = A[t];
    if (t > 0) a.addmm_(H[t - 1], w_hh_t);  // h_0 = 0
    a.narrow(1, 0, 2 * C).sigmoid_();  // i, f
    a.narrow(1, 2 * C, C).tanh_();     // g
    a.narrow(1, 3 * C, C).sigmoid_();  // o
    const float* gates = a.data_ptr<float>();
    const float* c_prev = Cs[t].data_ptr<float>();
    float* c = Cs[t + 1].data_ptr<float>();
    at::parallel_for(0, B, 4, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const float* g = gates + b * G;
        for (int64_t j = 0; j < C; ++j) c[b * C + j] = g[C + j] * c_prev[b * C + j] + g[j] * g[2 * C + j];
      }
    });
    auto m = M[t];
    at::tanh_out(m, Cs[t + 1]);
    m.mul_(a.narrow(1, 3 * C, C));
    auto h = H[t];
    at::mm_out(h, m, w_hr_t);
  }
  return {H, A, Cs, M};
}

// The recurrence's backward: dH (T, B, P), the loss's gradient at each output h_t, and the saved
// A, Cs -> dA (T, B, 4C), the gradient at the gate pre-activations a_t, and dH_total (T, B, P),
// the whole gradient at h_t (dH_t plus what h_t feeds into step t + 1).
std::vector<at::Tensor> lstmp_backward(const at::Tensor& dH, const at::Tensor& A, const at::Tensor& Cs,
                                       const at::Tensor& w_hh, const at::Tensor& w_hr) {
  check(dH, 3, "dH");
  check(A, 3, "A");
  check(Cs, 3, "Cs");
  const int64_t T = A.size(0), B = A.size(1), G = A.size(2), C = G / 4, P = w_hr.size(0);
  auto dA = at::empty({T, B, G}, A.options());
  auto dH_total = dH.clone();  // dH_t, to which W_hh^T da_{t+1} is added in place
  auto dm = at::empty({B, C}, A.options());
  auto dc = at::zeros({B, C}, A.options());  // gradient at c_t from step t + 1
  auto tanh_c = at::empty({B, C}, A.options());
  for (int64_t t = T - 1; t >= 0; --t) {
    auto dh = dH_total[t];
    if (t < T - 1) dh.addmm_(dA[t + 1], w_hh);
    at::mm_out(dm, dh, w_hr);
    at::tanh_out(tanh_c, Cs[t + 1]);
    const float* a = A[t].data_ptr<float>();
    const float* c_prev = Cs[t].data_ptr<float>();
    const float* tc = tanh_c.data_ptr<float>();
    const float* dm_ = dm.data_ptr<float>();
    float* dc_ = dc.data_ptr<float>();
    float* da = dA[t].data_ptr<float>();
    at::parallel_for(0, B, 4, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const float* g = a + b * G;
        float* d = da + b * G;
        for (int64_t j = 0; j < C; ++j) {
          const int64_t k = b * C + j;
          const float i = g[j], f = g[C + j], gg = g[2 * C + j], o = g[3 * C + j];
          const float dcell = dc_[k] + dm_[k] * o * (1.f - tc[k] * tc[k]);
          d[j] = dcell * gg * i * (1.f - i);
          d[C + j] = dcell * c_prev[k] * f * (1.f - f);
          d[2 * C + j] = dcell * i * (1.f - gg * gg);
          d[3 * C + j] = dm_[k] * tc[k] * o * (1.f - o);
          dc_[k] = dcell * f;
        }
      }
    });
  }
  return {dA, dH_total};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &lstmp_forward, "LSTMP time loop, forward");
  m.def("backward", &lstmp_backward, "LSTMP time loop, backward");
}
