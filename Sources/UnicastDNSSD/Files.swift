#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small text file's contents (at most 1 MiB), or nil when it cannot be read: configuration
/// and key files. Plain POSIX calls, so nothing more than the file is opened.
func readTextFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while bytes.count < 1 << 20 {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { return count == 0 ? String(decoding: bytes, as: UTF8.self) : nil }
        bytes += chunk[0..<count]
    }
    return nil
}
