// examples/app/app.c in C++: loads PyTorch weights, runs the forward pass,
// one training step and the forward pass again, writes both sets of logits
// and prints the loss.  Usage: app WEIGHTS.safetensors X.bin LABELS.bin LOGITS_OUT.bin
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "mlp.h"

namespace {

constexpr int kBatch = 32, kInputs = 784, kClasses = 10;

// The model, destroyed with its owner.
using Model = std::unique_ptr<mlp, decltype(&mlp_destroy)>;

// True when st is OK; else prints the message and frees the status.
bool ok(mlc_status st, const std::string &what) {
  if (!st) return true;
  std::cerr << "app: " << what << ": " << mlc_status_message(st) << "\n";
  mlc_status_free(st);
  return false;
}

template <typename T> bool read_raw(const char *path, std::vector<T> &dst) {
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char *>(dst.data()), static_cast<std::streamsize>(dst.size() * sizeof(T)));
  if (f.gcount() == static_cast<std::streamsize>(dst.size() * sizeof(T))) return true;
  std::cerr << "app: " << path << ": expected " << dst.size() * sizeof(T) << " bytes\n";
  return false;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 5) {
    std::cerr << "usage: app WEIGHTS.safetensors X.bin LABELS.bin LOGITS_OUT.bin\n";
    return 2;
  }
  std::vector<float> x(kBatch * kInputs), logits(2 * kBatch * kClasses);
  std::vector<int32_t> labels(kBatch);
  if (!read_raw(argv[2], x) || !read_raw(argv[3], labels)) return 1;

  mlp_options opt{};
  opt.threads = 2;
  mlp *raw = nullptr;
  if (!ok(mlp_create(&opt, &raw), "create")) return 1;
  Model m(raw, mlp_destroy);
  float loss = 0;
  if (!ok(mlp_load_weights(m.get(), argv[1]), "load weights") ||
      !ok(mlp_forward(m.get(), x.data(), logits.data()), "forward") ||
      !ok(mlp_train_step(m.get(), x.data(), labels.data(), &loss), "train step") ||
      !ok(mlp_forward(m.get(), x.data(), logits.data() + kBatch * kClasses), "forward"))
    return 1;
  std::ofstream out(argv[4], std::ios::binary);
  out.write(reinterpret_cast<const char *>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  if (!out.flush()) {
    std::cerr << "app: cannot write " << argv[4] << "\n";
    return 1;
  }
  std::printf("loss %.7g\n", static_cast<double>(loss));
  return 0;
}
