// The runners' command line: one positional argument (the model file) and `--name value` options, each named by the
// runner; what is missing or unknown stops it with a message. Plain C++, no torch: the ExecuTorch runner links no
// libtorch.
#pragma once

#include <initializer_list>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

namespace runner_args {

class Args {
 public:
  // `options`: the --names taken, each with a value; `required`: those that must be given; `usage`: the error
  // message when the file or a required option is missing.
  Args(int argc, char** argv, std::initializer_list<const char*> options, std::initializer_list<const char*> required,
       const char* usage)
      : options_(options.begin(), options.end()) {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (options_.count(a)) {
        if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
        values_[a] = argv[++i];
      } else if (file_.empty() && a.rfind("--", 0) != 0) {
        file_ = a;
      } else {
        throw std::runtime_error("unexpected argument " + a);
      }
    }
    bool complete = !file_.empty();
    for (const char* name : required) complete = complete && values_.count(name);
    if (!complete) throw std::runtime_error(usage);
  }

  const std::string& file() const { return file_; }

  // The option's value, or `fallback` where it was not given.
  std::string get(const std::string& name, const std::string& fallback = "") const {
    const auto value = values_.find(name);
    return value == values_.end() ? fallback : value->second;
  }

  // A count of at least 1 (repeats, threads), or `fallback` where it was not given.
  int count(const std::string& name, int fallback) const {
    const auto value = values_.find(name);
    if (value == values_.end()) return fallback;
    const std::string& text = value->second;
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || n < 1) throw std::runtime_error(name + " must be a whole number of at least 1");
    return n;
  }

 private:
  std::set<std::string> options_;
  std::map<std::string, std::string> values_;  // the options given
  std::string file_;
};

} // namespace runner_args
