import Foundation

/// A small text file's contents, or nil when it cannot be read (configuration and key files).
func readTextFile(_ path: String) -> String? {
    FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
}
