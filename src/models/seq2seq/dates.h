// models/seq2seq/dates.h — the calendar the dates task writes its examples in (tasks.cpp), private
// to the models layer and its tests.
#pragma once

#include <string>

namespace qkv {

struct Date {
  int year = 2000, month = 1, day = 1;
};
enum class DateFormat {
  spelled,      // "march 3rd 2021"
  us_short,     // "03/03/21"   (MM/DD/YY; 50–99 → 19xx, 00–49 → 20xx)
  day_month,    // "3 Mar 2021"
  ymd_slashes,  // "2021/3/3"
  weekday,      // "Wednesday, March 3, 2021"
};
inline constexpr int kDateFormats = 5;
std::string format_date(const Date& date, DateFormat format);
std::string iso_date(const Date& date);  // "2021-03-03"
int days_in_month(int year, int month);
// 0 = Sunday … 6 = Saturday (proleptic Gregorian).
int weekday_of(const Date& date);

}  // namespace qkv
