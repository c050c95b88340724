// SPDX-License-Identifier: MIT
// A minimal JSON writer for the programs' --json output (objects, arrays, numbers, strings).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace softmax {

class JsonWriter {
 public:
  JsonWriter& begin_object(const char* key = nullptr) { return open(key, '{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array(const char* key = nullptr) { return open(key, '['); }
  JsonWriter& end_array() { return close(']'); }

  JsonWriter& field(const char* key, const std::string& v) {
    prefix(key);
    out_ += quote(v);
    return *this;
  }
  JsonWriter& field(const char* key, const char* v) { return field(key, std::string(v)); }
  JsonWriter& field(const char* key, bool v) {
    prefix(key);
    out_ += v ? "true" : "false";
    return *this;
  }
  JsonWriter& field(const char* key, double v) {
    prefix(key);
    if (!std::isfinite(v)) {
      out_ += "null";  // JSON has no NaN or infinity
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", v);
      out_ += buf;
    }
    return *this;
  }
  JsonWriter& field(const char* key, int v) { return field(key, static_cast<long long>(v)); }
  JsonWriter& field(const char* key, long long v) {
    prefix(key);
    out_ += std::to_string(v);
    return *this;
  }
  JsonWriter& field(const char* key, long v) { return field(key, static_cast<long long>(v)); }

  const std::string& str() const { return out_; }

 private:
  JsonWriter& open(const char* key, char bracket) {
    prefix(key);
    out_ += bracket;
    first_.push_back(true);
    return *this;
  }
  JsonWriter& close(char bracket) {
    first_.pop_back();
    out_ += '\n' + std::string(2 * first_.size(), ' ') + bracket;
    return *this;
  }
  void prefix(const char* key) {
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
      out_ += '\n' + std::string(2 * first_.size(), ' ');
    }
    if (key) out_ += quote(key) + ": ";
  }
  static std::string quote(const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        q += '\\';
        q += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        q += buf;
      } else {
        q += c;
      }
    }
    return q + '"';
  }

  std::string out_;
  std::vector<bool> first_;
};

}  // namespace softmax
