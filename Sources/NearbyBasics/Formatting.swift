#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// Numbers as Foundation formatted them. The C library is here only for `vsnprintf`, the one
// correctly rounded `%.Nf`; nothing in this file reads or writes anything.

/// What Foundation's `duration.formatted(.units(allowed: [.milliseconds]))` wrote (en_US):
/// whole milliseconds, half to even, thousands grouped with commas, e.g. "175 ms", "1,234 ms".
package func millisecondsText(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    let perMillisecond: Int64 = 1_000_000_000_000_000
    // Both components carry the duration's sign; count in milliseconds and what is left.
    var milliseconds = seconds.multipliedReportingOverflow(by: 1000).partialValue + attoseconds / perMillisecond
    let rest = attoseconds % perMillisecond
    let half = perMillisecond / 2
    if rest.magnitude > half.magnitude || (rest.magnitude == half.magnitude && milliseconds % 2 != 0) {
        milliseconds += rest < 0 ? -1 : 1
    }
    let digits = String(milliseconds.magnitude)
    var grouped = ""
    for (index, digit) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { grouped.append(",") }
        grouped.append(digit)
    }
    return (milliseconds < 0 ? "-" : "") + grouped + " ms"
}

/// `value` with `digits` digits after the point, as C's `%.Nf` (and Foundation's
/// `String(format: "%.1f", value)`) writes it: correctly rounded, "inf", "nan".
package func fixedPoint(_ value: Double, digits: Int) -> String {
    let format = "%.\(digits)f"
    var buffer = [CChar](repeating: 0, count: 64)
    let needed = withVaList([value]) { vsnprintf(&buffer, buffer.count, format, $0) }
    if needed >= buffer.count {
        buffer = [CChar](repeating: 0, count: Int(needed) + 1)
        _ = withVaList([value]) { vsnprintf(&buffer, buffer.count, format, $0) }
    }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
