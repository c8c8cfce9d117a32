/// A duration in whole nanoseconds (also used by the shell and the command-line tool).
package func nanoseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
}

/// A duration as people read it in messages: `5 s`, `0.25 s`.
package func secondsText(_ duration: Duration) -> String {
    let value = Double(nanoseconds(duration)) / 1e9
    return value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
}
