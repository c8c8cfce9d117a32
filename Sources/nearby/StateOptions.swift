import ArgumentParser
import Foundation
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

    /// For commands that only read: a --state-dir that does not exist is a typo, not an empty
    /// store. (The default directory may be missing: nothing was stored yet.)
    func requireExisting() throws {
        guard let stateDirectory else { return }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: stateDirectory, isDirectory: &isDirectory) else {
            throw ValidationError("--state-dir \(stateDirectory) does not exist (nearby identity create --state-dir \(stateDirectory) makes one)")
        }
        guard isDirectory.boolValue else { throw ValidationError("--state-dir \(stateDirectory) is not a directory") }
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
    if path == "-" { return [UInt8](FileHandle.standardInput.readDataToEndOfFile()) }
    // FileHandle, not FileManager: it also reads pipes such as <(echo secret).
    guard let handle = FileHandle(forReadingAtPath: path) else {
        throw ValidationError("cannot read \(what) \(path) (no such file, or not readable)")
    }
    defer { try? handle.close() }
    return [UInt8](handle.readDataToEndOfFile())
}

/// A passphrase from --passphrase-file (first line), else $NEARBY_PASSPHRASE.
func passphrase(from file: String?) throws -> String? {
    if let file {
        let text = String(decoding: try readInput(file, what: "passphrase file"), as: UTF8.self)
        return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
    }
    return ProcessInfo.processInfo.environment["NEARBY_PASSPHRASE"]
}

func iso8601(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.string(from: date)
}

/// Parses an ISO 8601 time: `2026-11-22T07:30:00Z`, with fractions or an offset, or a date.
func parseTime(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    for options: ISO8601DateFormatter.Options in [
        [.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds], [.withFullDate],
    ] {
        formatter.formatOptions = options
        if let date = formatter.date(from: text) { return date }
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
