// `qkv bench attention --device cuda`: the GPU kernels (Path::cuda, issue 32) on the CPU run's
// cases and data, checked on its float64 slices first, then timed: TFLOP/s.
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "bench/attention_data.h"
#include "bench/common.h"
#include "output.h"
#include "qkv/attention.h"
#include "qkv/device.h"
#include "qkv/terminal.h"

namespace qkv::cli::attention_bench {
namespace {

using bench::Settings;

// One case on the GPU: TFLOP/s with the same FLOP counts, checked first on the same slices.
struct GpuRow {
  Case c;
  Precision precision = Precision::fp32;
  std::optional<double> fwd_s{}, bwd_s{};          // median seconds
  std::optional<double> fwd_error{}, bwd_error{};  // max|X − R| on the checked slices
  std::optional<double> fwd_exact{}, bwd_exact{};  // bf16: against float64 of the inputs
  std::string unavailable;                         // why the GPU path refused the case
};

std::optional<double> tflops(double flops, std::optional<double> seconds) {
  if (!seconds || *seconds <= 0) return std::nullopt;
  return flops / *seconds / 1e12;
}

// The element type of the device copies: float32 (CUDA cores) or bfloat16 (tensor cores).
DeviceDType device_dtype(Precision precision) {
  return precision == Precision::bf16 ? DeviceDType::bf16 : DeviceDType::f32;
}

class GpuBench {
 public:
  GpuBench(const Settings& s, Precision precision, int repeats)
      : s_(s), precision_(precision), repeats_(repeats) {}

  GpuRow run(const Case& c, uint64_t seed, Progress& progress, const std::string& tag) {
    GpuRow row{.c = c, .precision = precision_};
    auto stage = [&](const std::string& what) { progress.show(tag + " " + c.name + ": " + what); };
    stage("data and float64 reference slices");
    const Data d = make_data(c, s_.threads, seed, precision_);
    const std::vector<bench::Slice> slices = make_slices(c, d);
    const DeviceDType dt = device_dtype(precision_);
    stage("copies to the GPU");
    const DeviceArray q = DeviceArray::from_host(d.q, dt), k = DeviceArray::from_host(d.k, dt),
                      v = DeviceArray::from_host(d.v, dt);
    DeviceArray out(Shape{c.B, c.Hq, c.L, c.Dv}, dt), lse(Shape{c.B, c.Hq, c.L}, DeviceDType::f32);
    AttentionOptions o = options(c);
    DeviceAttention fa;
    fa.q = q.view(), fa.k = k.view(), fa.v = v.view(), fa.out = out.view(),
    fa.logsumexp = lse.view();
    try {
      stage("GPU forward: validation");
      attention(fa, o);
      const Tensor host_out = out.to_host();  // waits for the kernel
      bench::check_finite(c.name, "the GPU forward's output", host_out.data<float>(),
                          host_out.numel());
      double e = 0, x = 0;
      for (const bench::Slice& sl : slices) {
        e = std::max(e, bench::check_forward(c.name, "cuda", sl, host_out.data<float>()));
        if (precision_ == Precision::bf16)
          x = std::max(x, bench::exact_forward_error(sl, host_out.data<float>()));
      }
      row.fwd_error = e;
      if (precision_ == Precision::bf16) row.fwd_exact = x;
    } catch (const Error& e) {
      // A case the GPU path refuses (not implemented, not supported): "—", and why. A wrong
      // result or a CUDA failure is a runtime error and ends the benchmark.
      if (e.kind() == Error::Kind::runtime) throw;
      row.unavailable = e.what();
      return row;
    }
    stage("GPU forward: timing");
    row.fwd_s = time([&] { attention(fa, o); });
    if (!c.backward) return row;

    stage("GPU backward: validation");
    const DeviceArray dout = DeviceArray::from_host(d.dout, dt);
    DeviceArray dq(Shape{c.B, c.Hq, c.L, c.Dk}, dt), dk(Shape{c.B, c.Hkv, c.S, c.Dk}, dt),
        dv(Shape{c.B, c.Hkv, c.S, c.Dv}, dt);
    attention(fa, o);  // out and lse of these inputs, as the backward needs them
    DeviceAttentionBackward ba;
    ba.dout = dout.view(), ba.q = q.view(), ba.k = k.view(), ba.v = v.view(), ba.out = out.view(),
    ba.logsumexp = lse.view(), ba.dq = dq.view(), ba.dk = dk.view(), ba.dv = dv.view();
    try {
      attention_backward(ba, o);
      const Tensor host_dq = dq.to_host();
      bench::check_finite(c.name, "the GPU backward's dq", host_dq.data<float>(), host_dq.numel());
      double e = 0;
      std::optional<double> x;
      for (const bench::Slice& sl : slices) {
        // dq row by row from the whole case; dk and dv (sums over every row) on the slice as a
        // problem of its own, on the GPU too.
        e = std::max(e, bench::check_dq_rows(c.name, "cuda", sl, host_dq.data<float>()));
        if (precision_ == Precision::bf16)
          x = std::max(x.value_or(0.0), bench::exact_dq_rows_error(sl, host_dq.data<float>()));
        const SliceGrads g = slice_backward(sl);
        e = std::max(e, bench::check_backward(c.name, "cuda", sl, g.dq.data<float>(),
                                              g.dk.data<float>(), g.dv.data<float>()));
        if (precision_ == Precision::bf16)
          x = std::max(*x, bench::exact_backward_error(sl, g.dq.data<float>(), g.dk.data<float>(),
                                                       g.dv.data<float>()));
      }
      row.bwd_error = e, row.bwd_exact = x;
    } catch (const Error& e) {
      if (e.kind() == Error::Kind::runtime) throw;
      row.unavailable = e.what();
      return row;
    }
    stage("GPU backward: timing");
    row.bwd_s = time([&] { attention_backward(ba, o); });
    return row;
  }

 private:
  AttentionOptions options(const Case& c) const {
    AttentionOptions o;
    o.causal = c.causal;
    o.path = Path::cuda;  // the precision is the device arrays' dtype (device_dtype)
    return o;
  }

  // The calls are asynchronous: each timed run ends when the GPU is done (cuda_synchronize of
  // the default stream, the one the kernels run on here). Median of repeats_ after a warm-up;
  // bench::median_seconds batches runs shorter than 0.1 ms, the sync included in each.
  double time(const std::function<void()>& launch) {
    return bench::median_seconds(
        [&] {
          launch();
          cuda_synchronize();
        },
        repeats_);
  }

  struct SliceGrads {
    Tensor dq, dk, dv;
  };
  // The slice's own problem ([1, 1, rows, D] against [1, 1, S, D]) forward and backward on the
  // GPU, copied back as float32.
  SliceGrads slice_backward(const bench::Slice& sl) const {
    const DeviceDType dt = device_dtype(precision_);
    const DeviceArray q = DeviceArray::from_host(sl.q, dt), k = DeviceArray::from_host(sl.k, dt),
                      v = DeviceArray::from_host(sl.v, dt),
                      dout = DeviceArray::from_host(sl.dout, dt);
    DeviceArray out(sl.q.shape(), dt), lse(Shape{1, 1, sl.rows}, DeviceDType::f32);
    DeviceArray dq(sl.q.shape(), dt), dk(sl.k.shape(), dt), dv(sl.v.shape(), dt);
    AttentionOptions o = sl.options;
    o.path = Path::cuda, o.precision = Precision::fp32;  // the arrays' dtype decides
    DeviceAttention fa;
    fa.q = q.view(), fa.k = k.view(), fa.v = v.view(), fa.out = out.view(),
    fa.logsumexp = lse.view();
    attention(fa, o);
    DeviceAttentionBackward ba;
    ba.dout = dout.view(), ba.q = q.view(), ba.k = k.view(), ba.v = v.view(), ba.out = out.view(),
    ba.logsumexp = lse.view(), ba.dq = dq.view(), ba.dk = dk.view(), ba.dv = dv.view();
    attention_backward(ba, o);
    return {dq.to_host(), dk.to_host(), dv.to_host()};
  }

  Settings s_;
  Precision precision_;
  int repeats_;
};

nlohmann::json gpu_json(const GpuRow& r, const Settings& s, int repeats,
                        const std::string& device_name) {
  const Case& c = r.c;
  const auto f = tflops(cases::forward_flops(c), r.fwd_s);
  const auto b = c.backward ? tflops(cases::backward_flops(c), r.bwd_s) : std::nullopt;
  nlohmann::json j = case_json(c);
  auto scaled = [](std::optional<double> x, double by) -> std::optional<double> {
    if (!x) return std::nullopt;
    return *x * by;
  };
  j.update(
      {{"device", "cuda"},
       {"device_name", device_name},
       {"precision", std::string(to_string(r.precision))},
       {"repeats", repeats},
       {"quick", s.quick},
       {"tflops_fwd", num(f)},
       {"tflops_bwd", num(b)},
       // The CPU rows' names too, so that compare_torch.py and other readers of --json
       // match the rows either way.
       {"fwd_gflops", num(scaled(f, 1e3))},
       {"bwd_gflops", num(scaled(b, 1e3))},
       {"fwd_ms", num(ms(r.fwd_s))},
       {"bwd_ms", num(ms(r.bwd_s))},
       {"fwd_max_error", num(r.fwd_error)},
       {"bwd_max_error", num(r.bwd_error)},
       {"fwd_error_vs_float64", num(r.fwd_exact)},
       {"bwd_error_vs_float64", num(r.bwd_exact)},
       {"unavailable", r.unavailable.empty() ? nlohmann::json() : nlohmann::json(r.unavailable)}});
  return j;
}

std::string sci_str(std::optional<double> x) {
  if (!x) return "—";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1e", *x);
  return buffer;
}

std::string ms_str(std::optional<double> seconds) {
  if (!seconds) return "—";
  return bench::fixed_or_significant(*seconds * 1e3, 3);
}

void print_gpu_bf16_note(const std::vector<GpuRow>& rows) {
  std::cout << "\nbf16, largest error on the checked rows, fwd/bwd: against float64 of the inputs\n"
               "as given | of the rounded inputs (§1.1b's check)\n";
  for (const GpuRow& r : rows)
    std::cout << "  " << r.c.name << ": " << sci_str(r.fwd_exact) << "/" << sci_str(r.bwd_exact)
              << " | " << sci_str(r.fwd_error) << "/" << sci_str(r.bwd_error) << "\n";
}

}  // namespace

int run_on_gpu(const BenchAttentionArgs& args) {
  const CudaDevice device = cuda_device();
  if (!device.present)
    throw Error("qkv bench attention --device cuda: " + device.description, Error::Kind::runtime);
  if (args.thread_counts.size() > 1)
    throw Error(
        "qkv bench attention --device cuda: --threads takes one count there (the CPU's "
        "threads for the float64 checks), not a sweep",
        Error::Kind::invalid_argument);
  Settings s = bench::resolve(args.common);
  if (!args.thread_counts.empty()) s.threads = args.thread_counts.front();
  // GPU runs are short and their times spread more than the CPU's: 20 timed runs unless asked.
  const int repeats = args.common.repeats > 0 ? s.repeats : (s.quick ? 3 : 20);
  const std::vector<Case> cases = selected_cases(args.cases, s.quick);
  const Precision precision = *parse_precision(args.precision);
  if (!s.json)
    std::cout << "qkv bench attention --device cuda: " << device.description << "; "
              << (precision == Precision::bf16
                      ? "bf16 inputs (tensor cores, float32 accumulation and softmax)"
                      : "float32 (CUDA cores)")
              << ", median of " << repeats << " after a warm-up"
              << (s.quick ? " (--quick: small shapes, a smoke test)" : "") << "\n\n";
  const std::vector<int> widths = {10, 19, 8, 8, 9, 9, 17};
  auto line = [&](const std::vector<std::string>& cells) {
    std::cout << table_row(cells, widths, 2) << "\n";
  };
  if (!s.json) {
    line({"case", "shape", "fwd", "bwd", "fwd", "bwd", "max error"});
    line({"", "", "TF/s", "TF/s", "ms", "ms", "fwd/bwd"});
  }
  Progress progress;
  GpuBench bench(s, precision, repeats);
  std::vector<GpuRow> rows;
  std::size_t run = 0;
  for (const Case& c : cases) {
    const std::string tag = "[" + std::to_string(++run) + "/" + std::to_string(cases.size()) + "]";
    const GpuRow r = bench.run(c, seed_of(c.name), progress, tag);
    progress.clear();
    if (!r.unavailable.empty())
      std::cerr << "qkv: warning: bench attention --device cuda: case " << c.name
                << ": the GPU path is unavailable (" << r.unavailable << "); its columns show —\n";
    if (s.json) {
      std::cout << gpu_json(r, s, repeats, device.description).dump() << "\n";
    } else {
      line({c.name, cases::shape_string(c),
            bench::rate_str(tflops(cases::forward_flops(c), r.fwd_s)),
            bench::rate_str(c.backward ? tflops(cases::backward_flops(c), r.bwd_s) : std::nullopt),
            ms_str(r.fwd_s), ms_str(r.bwd_s), sci_str(r.fwd_error) + "/" + sci_str(r.bwd_error)});
    }
    flush_stdout();
    rows.push_back(r);
  }
  if (!s.json) {
    if (precision == Precision::bf16) print_gpu_bf16_note(rows);
    std::cout
        << "\nFLOPs 4·B·Hq·L·S·D forward, half when causal, 2.5× that backward (timed alone,\n"
           "given the forward's output and logsumexp). Each timed run ends when the GPU is\n"
           "done (cuda_synchronize). Checked first on the last 32 rows of the first and\n"
           "last head against the float64 reference (max error: max|X − R| there).\n";
  }
  return 0;
}

}  // namespace qkv::cli::attention_bench
