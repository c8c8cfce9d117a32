import NetworkPlatform
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import PeerTrust

/// Where the identity and the trust store live.
struct StateDirectory: ParsableArguments {
    @Option(name: .customLong("state-dir"), help: ArgumentHelp(
        "Directory of the identity and trust store (default: $NEARBY_STATE_DIR, else $XDG_STATE_HOME/nearby, else ~/.local/state/nearby).",
        valueName: "dir"))
    var stateDirectory: String?

    var directory: URL { stateDirectory.map { URL(fileURLWithPath: $0) } ?? IdentityStore.defaultDirectory }
    var identities: IdentityStore { IdentityStore(directory: directory) }
    var trust: TrustStore { TrustStore(directory: directory.appendingPathComponent("trust")) }

    /// The identity commands that connect use: the stored one, else one made and stored now,
    /// which is said on stderr with its peer ID (no peer has pinned it yet).
    func identityMadeIfMissing(say: (String) -> Void = { writeToStandardError($0) }) throws(PeerTrustError) -> PeerIdentity {
        let loaded = try identities.loadOrCreate()
        if loaded.created {
            let id = loaded.identity.peerID
            say("made a new identity in \(directory.path) (peer ID \(id)); peers must pin it before they trust this one: nearby trust pin \(id)\n")
        }
        return loaded.identity
    }

    /// For commands that only read: a --state-dir that does not exist is a typo, not an empty
    /// store. (The default directory may be missing: nothing was stored yet.)
    func requireExisting() throws {
        guard let stateDirectory else { return }
        let found = fileStatus(stateDirectory)
        guard found.exists else {
            throw ValidationError("--state-dir \(stateDirectory) does not exist (nearby identity create --state-dir \(stateDirectory) makes one)")
        }
        guard found.isDirectory else { throw ValidationError("--state-dir \(stateDirectory) is not a directory") }
    }
}

/// The state directory and --json, for the identity and trust commands.
struct StateOptions: ParsableArguments {
    @OptionGroup var location: StateDirectory

    @Flag(help: "Print JSON instead of text.")
    var json = false

    var directory: URL { location.directory }
    var identities: IdentityStore { location.identities }
    var trust: TrustStore { location.trust }
}

/// Reads a whole file named on the command line ("-": standard input); bad input exits 2.
func readInput(_ path: String, what: String) throws -> [UInt8] {
    let unreadable = ValidationError("cannot read \(what) \(path) (no such file, or not readable)")
    if path == "-" {
        guard let bytes = readAllBytes(STDIN_FILENO) else { throw unreadable }
        return bytes
    }
    // open and read, not FileManager: it also reads pipes such as <(echo secret).
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { throw unreadable }
    defer { close(descriptor) }
    guard let bytes = readAllBytes(descriptor) else { throw unreadable }
    return bytes
}

/// Everything left to read from `descriptor`, or nil when reading fails (a directory, say).
func readAllBytes(_ descriptor: Int32) -> [UInt8]? {
    guard case .bytes(let bytes) = readToEnd(descriptor) else { return nil }
    return bytes
}

/// Whether `path` names something, and whether that is a directory (symbolic links followed):
/// what FileManager's fileExists(atPath:isDirectory:) said.
func fileStatus(_ path: String) -> (exists: Bool, isDirectory: Bool) {
    var status = stat()
    guard stat(path, &status) == 0 else { return (false, false) }
    return (true, status.st_mode & S_IFMT == S_IFDIR)
}

/// A passphrase from --passphrase-file (first line), else $NEARBY_PASSPHRASE.
func passphrase(from file: String?) throws -> String? {
    if let file {
        let text = String(decoding: try readInput(file, what: "passphrase file"), as: UTF8.self)
        return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
    }
    return ProcessInfo.processInfo.environment["NEARBY_PASSPHRASE"]
}

/// `2026-11-25T07:28:10Z`: the time in UTC to the second (rounded to the millisecond first).
func iso8601(_ date: Date) -> String {
    CivilTime.internetDateTime(sinceReferenceDate: date.timeIntervalSinceReferenceDate)
}

/// Parses an ISO 8601 time: `2026-11-22T07:30:00Z`, with fractions or an offset, or a date.
/// A fraction counts to the millisecond (more digits are dropped), as ISO8601DateFormatter did.
func parseTime(_ text: String) -> Date? {
    var text = Substring(text)
    if let point = text.firstIndex(of: "."), text[..<point].contains("T") {
        let digits = text[text.index(after: point)...].prefix(while: { $0.isASCII && $0.isNumber })
        if digits.count > 3 { text.removeSubrange(digits.index(digits.startIndex, offsetBy: 3)..<digits.endIndex) }
    }
    let styles = [
        Date.ISO8601FormatStyle(), Date.ISO8601FormatStyle(includingFractionalSeconds: true), Date.ISO8601FormatStyle().year().month().day(),
    ]
    for style in styles {
        if let date = try? style.parse(String(text)) {
            // Whole milliseconds since 1970, as the formatter counted.
            return Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
        }
    }
    return nil
}

/// Turns a PeerTrustError into the CLI's exit statuses: 2 for input the user gave, 1 otherwise.
func inputError(_ error: PeerTrustError) -> any Error {
    switch error.code {
    case .malformed, .passphraseRequired, .wrongPassphrase: ValidationError(error.message)
    default: RuntimeFailure(error.message)
    }
}

func certificateMembers(_ certificate: Certificate) -> [(String, OutputValue)] {
    [
        ("subject", .string(certificate.subject)), ("issuer", .string(certificate.issuer)),
        ("notBefore", .string(iso8601(certificate.notBefore))), ("notAfter", .string(iso8601(certificate.notAfter))),
    ]
}
