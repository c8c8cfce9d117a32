#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What reading a file descriptor to its end gave.
package enum ReadToEnd {
    /// Everything there was.
    case bytes([UInt8])
    /// `read` failed with this errno (a directory, say).
    case failed(errno: Int32)
    /// More than the limit asked for.
    case tooLarge
}

/// Reads `descriptor` to its end, in 64 KiB chunks, retrying interrupted reads; stops with
/// ``ReadToEnd/tooLarge`` once more than `limit` bytes came.
package func readToEnd(_ descriptor: Int32, limit: Int = .max) -> ReadToEnd {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            return .failed(errno: errno)
        }
        if count == 0 { return .bytes(bytes) }
        bytes += chunk[..<count]
        if bytes.count > limit { return .tooLarge }
    }
}
