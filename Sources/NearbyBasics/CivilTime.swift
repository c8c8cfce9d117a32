/// UTC calendar fields of a time, as Foundation's formatters (ICU) gave them: the Gregorian
/// calendar from 1582-10-15, the Julian one before, years before 1 counted in that era
/// (the year 0 is 1 BC). FoundationEssentials has no DateFormatter; this is what the
/// programs printed with it.
package struct CivilTime: Hashable, Sendable {
    /// The year of its era (1 or more).
    package var year: Int64
    package var month: Int64
    package var day: Int64
    package var hour: Int64
    package var minute: Int64
    package var second: Int64

    /// The fields of `seconds` after 1970-01-01T00:00:00Z.
    package init(secondsSince1970 seconds: Int64) {
        let (days, secondOfDay) = Self.floorDivision(seconds, 86_400)
        let (year, month, day) = days < -141_427 ? Self.julianDate(days) : Self.gregorianDate(days)
        self.year = year > 0 ? year : 1 - year
        self.month = month
        self.day = day
        hour = secondOfDay / 3600
        minute = secondOfDay / 60 % 60
        second = secondOfDay % 60
    }

    /// What ISO8601DateFormatter with `.withInternetDateTime` wrote, e.g. `2026-11-25T07:28:10Z`,
    /// for a time given as Foundation's `Date.timeIntervalSinceReferenceDate`: rounded to the
    /// millisecond, then the second it falls in.
    package static func internetDateTime(sinceReferenceDate interval: Double) -> String {
        let milliseconds = ((interval + 978_307_200) * 1000 + 0.5).rounded(.down)
        let seconds = Int64(exactly: (milliseconds / 1000).rounded(.down)) ?? 0
        let time = CivilTime(secondsSince1970: seconds)
        return "\(time.dateText)T\(pad(time.hour, 2)):\(pad(time.minute, 2)):\(pad(time.second, 2))Z"
    }

    /// `yyyy-MM-dd`.
    package var dateText: String { "\(Self.pad(year, 4))-\(Self.pad(month, 2))-\(Self.pad(day, 2))" }

    /// `value` with zeros before it up to `count` digits.
    package static func pad(_ value: Int64, _ count: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, count - text.count)) + text
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let quotient = value / divisor
        let remainder = value % divisor
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    /// The proleptic Gregorian date `days` after 1970-01-01 (Hinnant's civil_from_days).
    private static func gregorianDate(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let (era, dayOfEra) = floorDivision(days + 719_468, 146_097)
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// The Julian date `days` after 1970-01-01 (counted in 4-year cycles from 0000-03-01).
    private static func julianDate(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let (cycle, dayOfCycle) = floorDivision(days + 719_470, 1461)
        let yearOfCycle = min(dayOfCycle / 365, 3)
        let dayOfYear = dayOfCycle - 365 * yearOfCycle
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (cycle * 4 + yearOfCycle + (month <= 2 ? 1 : 0), month, day)
    }
}
