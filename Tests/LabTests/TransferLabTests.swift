import Foundation
import Testing

/// `nearby send`, `nearby receive` and `nearby pipe` between two hosts of the lab: the receiver
/// (or the listening pipe) in h1, the sender in h2, each with its own identity and each pinning
/// the other. Files are at most 48 MiB (the debug build moves about 70 MB/s, and CI time counts);
/// transfers that must be cut half way are paced with --limit-rate.
extension LabTestSuite {
@Suite("files and pipes: nearby send, receive and pipe between two hosts")
struct TransferLabTests {
    static var nearby: String { DiscoveryLabTests.nearby }
    static let h1 = "198.18.1.1"
    /// The size of the large files: big enough to be cut half way, small enough for CI.
    static let large: Int64 = 48 << 20
    let helpers = ConnectionLabTests()

    typealias Identity = (directory: String, peerID: String)

    /// The receiver's identity ("Inbox") and the sender's ("Laptop"), each pinning the other.
    func peers(_ lab: Lab) async throws -> (inbox: Identity, laptop: Identity) {
        let inbox = try await helpers.identity(lab, "Inbox")
        let laptop = try await helpers.identity(lab, "Laptop")
        try await helpers.pin(lab, laptop.peerID, in: inbox.directory)
        try await helpers.pin(lab, inbox.peerID, in: laptop.directory)
        return (inbox, laptop)
    }

    /// `nearby ARGS`, each argument quoted for `sh -c`.
    func command(_ arguments: [String]) -> String {
        ([Self.nearby] + arguments).map { "'\($0)'" }.joined(separator: " ")
    }

    /// Starts `nearby ARGS` in `host` (stdout and stderr together, stdin empty). `exec`, so that
    /// the process's pid is nearby's own: a signal (SIGINT, SIGKILL) reaches nearby itself.
    func start(_ lab: Lab, _ host: String, _ arguments: [String]) throws -> LabProcess {
        try lab.start(["exec", host, "--", "sh", "-c", "exec 2>&1; exec \(command(arguments)) < /dev/null"])
    }

    /// Starts `nearby receive` in h1 into `folder` on `port` (not advertised, JSON events) and
    /// waits for its "listening" event.
    func receive(_ lab: Lab, into folder: String, port: Int, state: String) async throws -> LabProcess {
        let process = try start(
            lab, "h1", ["receive", "--dir", folder, "--port", String(port), "--name", "Inbox", "--no-advertise", "--json", "--state-dir", state])
        do {
            _ = try await process.waitForLine(containing: #""event":"listening""#, timeout: .seconds(20))
        } catch {
            await process.stop()
            throw error
        }
        return process
    }

    /// Starts `nearby send ARGS --json` in h2.
    func send(_ lab: Lab, _ arguments: [String], state: String) throws -> LabProcess {
        try start(lab, "h2", ["send"] + arguments + ["--json", "--state-dir", state])
    }

    /// Runs `nearby send ARGS --json` in h2 to its end; returns its exit status and output.
    func sendToEnd(_ lab: Lab, _ arguments: [String], state: String) async throws -> (status: Int32, output: String) {
        let process = try send(lab, arguments, state: state)
        let status = try await process.wait(timeout: .seconds(60))
        return (status, process.output)
    }

    /// A file of `bytes` random bytes at `path`.
    func randomFile(_ lab: Lab, _ path: String, bytes: Int64) async throws {
        try await lab.run(["exec", "h2", "--", "sh", "-c", "head -c \(bytes) /dev/urandom > '\(path)'"])
    }

    /// The SHA-256 of `path`, by `sha256sum` in `host`.
    func sha256(_ lab: Lab, _ host: String, _ path: String) async throws -> String {
        let output = try await lab.run(["exec", host, "--", "sha256sum", path])
        return String(output.prefix { !$0.isWhitespace })
    }

    /// A new folder `name` in `work`.
    func folder(_ work: String, _ name: String) throws -> String {
        let path = work + "/" + name
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// The size of the file at `path` (0 when there is none).
    func size(of path: String) -> Int64 {
        guard let value = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] else { return 0 }
        if let number = value as? NSNumber { return number.int64Value }
        if let number = value as? UInt64 { return Int64(number) }
        return (value as? Int).map { Int64($0) } ?? 0
    }

    /// The files under `folder`, by their paths relative to it.
    func files(in folder: String) throws -> Set<String> {
        let paths = try FileManager.default.subpathsOfDirectory(atPath: folder)
        return Set(paths.filter { path in
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: folder + "/" + path, isDirectory: &isFolder) && !isFolder.boolValue
        })
    }

    /// The receiver's partial file for `name` from the sender `peerID`: NAME.SENDER.part, SENDER
    /// the peer ID without dashes, 16 characters (Documentation/Protocols.md).
    func part(_ name: String, from peerID: String) -> String {
        "\(name).\(String(peerID.filter { $0 != "-" }.prefix(16))).part"
    }

    /// The `.part` files anywhere under `folder`.
    func parts(in folder: String) throws -> Set<String> {
        try files(in: folder).filter { $0.hasSuffix(".part") }
    }

    /// Polls (bounded) until the receiver's `.part` at `path` has at least `bytes` bytes, while
    /// `sender` runs.
    func waitForPart(_ path: String, atLeast bytes: Int64, sender: LabProcess, timeout: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if size(of: path) >= bytes { return }
            guard sender.isRunning else {
                // Also what a transfer too fast to cut half way looks like (the .part renamed already).
                throw LabError("the sender ended (\(sender.exitStatus ?? -1)) before \(path) had \(bytes) bytes (it has \(size(of: path))): \(sender.output)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw LabError("\(path) did not reach \(bytes) bytes within \(timeout) (it has \(size(of: path))): \(sender.output)")
    }

    /// Polls (bounded) until `process` printed an event named one of `names`; returns the first.
    func waitForEvent(_ names: [String], in process: LabProcess, timeout: Duration) async throws -> [String: Any] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let running = process.isRunning
            if let found = jsonLines(process.output).first(where: { names.contains($0["event"] as? String ?? "") }) { return found }
            guard running else { throw LabError("the process ended (\(process.exitStatus ?? -1)) without an event \(names): \(process.output)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw LabError("no event \(names) within \(timeout): \(process.output)")
    }

    /// The first event named `name` in a command's output.
    func event(_ name: String, in output: String) -> [String: Any]? {
        jsonLines(output).first { $0["event"] as? String == name }
    }

    /// Every event named `name` in a command's output.
    func events(_ name: String, in output: String) -> [[String: Any]] {
        jsonLines(output).filter { $0["event"] as? String == name }
    }

    /// A JSON number as a whole number.
    func number(_ value: Any?) -> Int64? {
        (value as? NSNumber)?.int64Value
    }

    @Test("a 48 MiB file sent from h2 to nearby receive in h1 arrives whole: both sides' done events carry its SHA-256, and no .part is left")
    func sendAndReceive() async throws {
        let lab = try Lab.require(hosts: 2)
        let (inbox, laptop) = try await peers(lab)
        let work = try Lab.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let inboxFolder = try folder(work, "inbox")
        let file = work + "/big.bin"
        try await randomFile(lab, file, bytes: Self.large)
        let expected = try await sha256(lab, "h2", file)
        let receiver = try await receive(lab, into: inboxFolder, port: 9641, state: inbox.directory)
        try await lab.withProcesses([receiver]) {
            let sent = try await sendToEnd(lab, [file, "--host", Self.h1, "--port", "9641"], state: laptop.directory)
            #expect(sent.status == 0, "\(sent.output)")
            #expect(event("connected", in: sent.output)?["peerID"] as? String == inbox.peerID, "\(sent.output)")
            let done = try #require(event("done", in: sent.output), "\(sent.output)")
            #expect(done["sha256"] as? String == expected, "\(done)")
            #expect(done["savedAs"] as? String == "big.bin", "\(done)")
            #expect(number(done["size"]) == Self.large && number(done["transferred"]) == Self.large, "\(done)")
            #expect(events("failed", in: sent.output).isEmpty, "\(sent.output)")

            let line = try await receiver.waitForLine(containing: #""event":"done""#, timeout: .seconds(10))
            let received = try #require(jsonLines(line).first, "\(line)")
            #expect(received["sha256"] as? String == expected, "\(line)")
            #expect(received["savedAs"] as? String == "big.bin", "\(line)")
            #expect(received["peerID"] as? String == laptop.peerID, "\(line)")
            #expect(number(received["size"]) == Self.large, "\(line)")
        }
        #expect(try await sha256(lab, "h1", inboxFolder + "/big.bin") == expected)
        #expect(try files(in: inboxFolder) == ["big.bin"])
        #expect(try parts(in: inboxFolder).isEmpty)
    }

    /// `nearby send FILE --resume` to the receiver on `port`, whose `folder` has a `.part` of
    /// at least 40 % of the file: it continues from there (resumedAt), sends less than 65 %
    /// of the file again, and the file arrives whole with no `.part` left.
    func resumeAndCheck(_ lab: Lab, _ file: String, port: Int, folder: String, expected: String, state: String, laptopID: String) async throws {
        let part = folder + "/" + self.part("big.bin", from: laptopID)
        let kept = size(of: part)
        #expect(kept >= Self.large * 2 / 5, "the .part has \(kept) of \(Self.large) bytes")
        #expect(!FileManager.default.fileExists(atPath: folder + "/big.bin"), "the file was complete before the kill")
        let sent = try await sendToEnd(lab, [file, "--host", Self.h1, "--port", String(port), "--resume"], state: state)
        #expect(sent.status == 0, "\(sent.output)")
        let started = try #require(event("started", in: sent.output), "\(sent.output)")
        #expect((number(started["resumedAt"]) ?? 0) >= Self.large * 2 / 5, "\(started)")
        let done = try #require(event("done", in: sent.output), "\(sent.output)")
        let transferred = try #require(number(done["transferred"]), "\(done)")
        #expect(transferred < Self.large * 65 / 100, "sent \(transferred) of \(Self.large) bytes again: \(done)")
        #expect(number(done["size"]) == Self.large, "\(done)")
        #expect(done["sha256"] as? String == expected, "\(done)")
        #expect(done["savedAs"] as? String == "big.bin", "\(done)")
        #expect(try await sha256(lab, "h1", folder + "/big.bin") == expected)
        #expect(try files(in: folder) == ["big.bin"])
        #expect(try parts(in: folder).isEmpty)
    }

    @Test("send --resume continues a transfer cut by SIGKILL of the sender, and one cut by SIGKILL of the receiver once it runs again on the same folder: less than 65 % goes again and the file hashes right")
    func resumeAfterKill() async throws {
        let lab = try Lab.require(hosts: 2)
        let (inbox, laptop) = try await peers(lab)
        let work = try Lab.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let file = work + "/big.bin"
        try await randomFile(lab, file, bytes: Self.large)
        let expected = try await sha256(lab, "h2", file)

        // The sender is killed at 40 % or more; --limit-rate (24 MiB/s: 2 s for the file) leaves
        // time to do it half way, however fast the hosts are.
        let first = try folder(work, "first")
        let receiver = try await receive(lab, into: first, port: 9642, state: inbox.directory)
        try await lab.withProcesses([receiver]) {
            let sender = try send(lab, [file, "--host", Self.h1, "--port", "9642", "--interval", "0.1", "--limit-rate", "24M"], state: laptop.directory)
            try await lab.withProcesses([sender]) {
                try await waitForPart(first + "/" + part("big.bin", from: laptop.peerID), atLeast: Self.large * 2 / 5, sender: sender)
                sender.kill()
                #expect(try await sender.wait(timeout: .seconds(10)) == 128 + SIGKILL, "\(sender.output)")
            }
            // The receiver saw the sender go (and let go of its .part) before the resume offers it.
            let failed = try await receiver.waitForLine(containing: #""event":"failed""#, timeout: .seconds(10))
            #expect(failed.contains(laptop.peerID), "\(failed)")
            try await resumeAndCheck(lab, file, port: 9642, folder: first, expected: expected, state: laptop.directory, laptopID: laptop.peerID)
        }

        // The receiver is killed at 40 % or more, then started again with the same folder and state.
        let second = try folder(work, "second")
        let killed = try await receive(lab, into: second, port: 9643, state: inbox.directory)
        try await lab.withProcesses([killed]) {
            let sender = try send(lab, [file, "--host", Self.h1, "--port", "9643", "--interval", "0.1", "--limit-rate", "24M"], state: laptop.directory)
            try await lab.withProcesses([sender]) {
                try await waitForPart(second + "/" + part("big.bin", from: laptop.peerID), atLeast: Self.large * 2 / 5, sender: sender)
                killed.kill()
                #expect(try await killed.wait(timeout: .seconds(10)) == 128 + SIGKILL, "\(killed.output)")
                #expect(try await sender.wait(timeout: .seconds(20)) == 1, "\(sender.output)")
                #expect(event("done", in: sender.output) == nil, "\(sender.output)")
            }
        }
        let restarted = try await receive(lab, into: second, port: 9644, state: inbox.directory)
        try await lab.withProcesses([restarted]) {
            try await resumeAndCheck(lab, file, port: 9644, folder: second, expected: expected, state: laptop.directory, laptopID: laptop.peerID)
        }
    }

    @Test("Ctrl-C on either side stops both within a second: SIGINT to send exits 130 and the receiver reports the file failed, keeping its .part; SIGINT to receive makes send exit 1 with a failed or stopped event")
    func interrupted() async throws {
        let lab = try Lab.require(hosts: 2)
        let (inbox, laptop) = try await peers(lab)
        let work = try Lab.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let inboxFolder = try folder(work, "inbox")
        let file = work + "/big.bin"
        try await randomFile(lab, file, bytes: Self.large)
        // The same bytes under another name, for the second transfer (its own .part).
        let other = work + "/other.bin"
        guard link(file, other) == 0 else { throw LabError("cannot link \(file) to \(other): errno \(errno)") }

        let receiver = try await receive(lab, into: inboxFolder, port: 9645, state: inbox.directory)
        try await lab.withProcesses([receiver]) {
            // SIGINT to the sender, a quarter of the way.
            let sender = try send(lab, [file, "--host", Self.h1, "--port", "9645", "--limit-rate", "24M"], state: laptop.directory)
            try await lab.withProcesses([sender]) {
                try await waitForPart(inboxFolder + "/" + part("big.bin", from: laptop.peerID), atLeast: Self.large / 4, sender: sender)
                let signalled = ContinuousClock.now
                sender.signal(SIGINT)
                let line = try await receiver.waitForLine(containing: #""event":"failed""#, timeout: .seconds(10))
                let took = ContinuousClock.now - signalled
                #expect(took < .seconds(1), "the receiver reported the failure \(took) after the sender's SIGINT: \(line)")
                #expect(jsonLines(line).first?["peerID"] as? String == laptop.peerID, "\(line)")
                #expect(try await sender.wait(timeout: .seconds(10)) == 130, "\(sender.output)")
                #expect(event("cancelled", in: sender.output) != nil, "\(sender.output)")
                #expect(event("done", in: sender.output) == nil, "\(sender.output)")
            }
            #expect(FileManager.default.fileExists(atPath: inboxFolder + "/" + part("big.bin", from: laptop.peerID)), "the receiver keeps the .part for --resume")
            #expect(!FileManager.default.fileExists(atPath: inboxFolder + "/big.bin"))
            #expect(receiver.isRunning, "the receiver goes on after a sender cancelled: \(receiver.output)")

            // SIGINT to the receiver, a quarter of the way through the other file.
            let second = try send(lab, [other, "--host", Self.h1, "--port", "9645", "--limit-rate", "24M"], state: laptop.directory)
            try await lab.withProcesses([second]) {
                try await waitForPart(inboxFolder + "/" + part("other.bin", from: laptop.peerID), atLeast: Self.large / 4, sender: second)
                let signalled = ContinuousClock.now
                receiver.signal(SIGINT)
                let said = try await waitForEvent(["failed", "stopped"], in: second, timeout: .seconds(10))
                let took = ContinuousClock.now - signalled
                #expect(took < .seconds(1), "the sender reported the stop \(took) after the receiver's SIGINT: \(said)")
                #expect(try await second.wait(timeout: .seconds(10)) == 1, "\(second.output)")
                #expect(event("done", in: second.output) == nil, "\(second.output)")
                _ = try await receiver.wait(timeout: .seconds(10))
            }
            #expect(!FileManager.default.fileExists(atPath: inboxFolder + "/other.bin"))
        }
    }

    @Test("a sender the receiver has not pinned is refused: send exits 1 and nothing is written")
    func notPinned() async throws {
        let lab = try Lab.require(hosts: 2)
        let inbox = try await helpers.identity(lab, "Inbox")
        let stranger = try await helpers.identity(lab, "Stranger")
        // The stranger trusts the receiver; the receiver does not know the stranger.
        try await helpers.pin(lab, inbox.peerID, in: stranger.directory)
        let work = try Lab.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let inboxFolder = try folder(work, "inbox")
        let file = work + "/note.txt"
        try Data("not for you\n".utf8).write(to: URL(fileURLWithPath: file))
        let receiver = try await receive(lab, into: inboxFolder, port: 9646, state: inbox.directory)
        try await lab.withProcesses([receiver]) {
            let refused = try await sendToEnd(lab, [file, "--host", Self.h1, "--port", "9646"], state: stranger.directory)
            #expect(refused.status == 1, "\(refused.output)")
            #expect(event("rejected", in: refused.output) != nil, "\(refused.output)")
            #expect(event("started", in: refused.output) == nil && event("done", in: refused.output) == nil, "\(refused.output)")
            let rejected = try await receiver.waitForLine(containing: #""event":"rejected""#, timeout: .seconds(10))
            #expect(rejected.contains(stranger.peerID), "\(rejected)")
            #expect(!receiver.output.contains(#""event":"connected""#), "\(receiver.output)")
            #expect(receiver.isRunning)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: inboxFolder).isEmpty)
    }

    @Test("a folder without --recursive is bad input (exit 2, naming --recursive, nothing sent); with --recursive its nested folders arrive as they were, hidden entries skipped")
    func recursive() async throws {
        let lab = try Lab.require(hosts: 2)
        let (inbox, laptop) = try await peers(lab)
        let work = try Lab.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let inboxFolder = try folder(work, "inbox")
        let tree = try folder(work, "tree")
        _ = try folder(tree, "sub/deeper")
        let contents: [String: Data] = [
            "a.txt": Data("alpha\n".utf8),
            "sub/b.bin": Data((0..<65536).map { _ in UInt8.random(in: 0...255) }),
            "sub/deeper/c.txt": Data("gamma\n".utf8),
        ]
        for (path, data) in contents { try data.write(to: URL(fileURLWithPath: tree + "/" + path)) }
        try Data("hidden\n".utf8).write(to: URL(fileURLWithPath: tree + "/.hidden"))

        let receiver = try await receive(lab, into: inboxFolder, port: 9647, state: inbox.directory)
        try await lab.withProcesses([receiver]) {
            let flat = try await sendToEnd(lab, [tree, "--host", Self.h1, "--port", "9647"], state: laptop.directory)
            #expect(flat.status == 2, "\(flat.output)")
            #expect(flat.output.contains("--recursive"), "\(flat.output)")
            #expect(!receiver.output.contains(#""event":"connected""#), "\(receiver.output)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: inboxFolder).isEmpty)

            let sent = try await sendToEnd(lab, [tree, "--recursive", "--host", Self.h1, "--port", "9647"], state: laptop.directory)
            #expect(sent.status == 0, "\(sent.output)")
            let saved = Set(events("done", in: sent.output).compactMap { $0["savedAs"] as? String })
            #expect(saved == Set(contents.keys.map { "tree/" + $0 }), "\(sent.output)")
            let skipped = events("skipped", in: sent.output).compactMap { $0["path"] as? String }
            #expect(skipped.contains { $0.hasSuffix("/.hidden") }, "\(sent.output)")
        }
        #expect(try files(in: inboxFolder) == Set(contents.keys.map { "tree/" + $0 }))
        for (path, data) in contents {
            #expect(FileManager.default.contents(atPath: inboxFolder + "/tree/" + path) == data, "\(path) differs")
        }
    }

    @Test("nearby pipe: pipe --listen in h1 and pipe --host from h2 carry 1 MiB each way at once; both exit 0 and each side's stdout is the other side's stdin")
    func pipeBothWays() async throws {
        let lab = try Lab.require(hosts: 2)
        let (listener, laptop) = try await peers(lab)
        let work = try Lab.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let (in1, out1, in2, out2) = (work + "/in1", work + "/out1", work + "/in2", work + "/out2")
        let mebibyte: Int64 = 1 << 20
        try await randomFile(lab, in1, bytes: mebibyte)
        try await randomFile(lab, in2, bytes: mebibyte)
        // stdin from a file and stdout to a file; the events (stderr) are the process's output.
        let listenCommand = command(["pipe", "--listen", "--no-advertise", "--port", "9648", "--json", "--state-dir", listener.directory])
        let listening = try lab.start(["exec", "h1", "--", "sh", "-c", "exec \(listenCommand) < '\(in1)' 2>&1 > '\(out1)'"])
        try await lab.withProcesses([listening]) {
            _ = try await listening.waitForLine(containing: #""event":"listening""#, timeout: .seconds(20))
            let connectCommand = command(["pipe", "--host", Self.h1, "--port", "9648", "--json", "--state-dir", laptop.directory])
            let connecting = try lab.start(["exec", "h2", "--", "sh", "-c", "exec \(connectCommand) < '\(in2)' 2>&1 > '\(out2)'"])
            try await lab.withProcesses([connecting]) {
                let connected = try await connecting.wait(timeout: .seconds(30))
                let listened = try await listening.wait(timeout: .seconds(10))
                #expect(connected == 0, "\(connecting.output)")
                #expect(listened == 0, "\(listening.output)")
            }
            #expect(event("connected", in: connecting.output)?["peerID"] as? String == listener.peerID, "\(connecting.output)")
        }
        #expect(size(of: out1) == mebibyte && size(of: out2) == mebibyte, "out1 \(size(of: out1)), out2 \(size(of: out2)) bytes")
        let sent1 = try await sha256(lab, "h1", in1)
        let sent2 = try await sha256(lab, "h2", in2)
        let got1 = try await sha256(lab, "h1", out1)
        let got2 = try await sha256(lab, "h2", out2)
        #expect(got1 == sent2, "h1's stdout is not h2's stdin")
        #expect(got2 == sent1, "h2's stdout is not h1's stdin")
    }

    @Test("interop: a Python peer written from Documentation/Protocols.md alone sends a file (and resumes one) to nearby receive, and echoes nearby pipe's bytes")
    func pythonPeerFromReadme() async throws {
        let lab = try Lab.require(hosts: 2)
        let (inbox, laptop) = try await peers(lab)
        let work = try Lab.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let inboxFolder = try folder(work, "inbox")
        let file = work + "/py.bin"
        try await randomFile(lab, file, bytes: 8 << 20)
        let expected = try await sha256(lab, "h2", file)
        let peer = ConnectionLabTests.repository.appendingPathComponent("Tools/lab.d/peers/stream_peer.py").path
        for (side, directory) in [("inbox", inbox.directory), ("laptop", laptop.directory)] {
            try await lab.run(["exec", "h1", "--", "sh", "-c", "\(command(["identity", "export", "--state-dir", directory])) > '\(work)/\(side).crt'"])
        }
        // The Python side uses the laptop's identity: the receiver has pinned it.
        let receiver = try await receive(lab, into: inboxFolder, port: 9649, state: inbox.directory)
        try await lab.withProcesses([receiver]) {
            let python = { (resume: Bool) async throws -> [String: Any] in
                let output = try await lab.run(
                    ["exec", "h2", "--", ConnectionLabTests.python, peer, "send", Self.h1, "9649", file, "--identity", laptop.directory + "/identity.pem",
                     "--trust", work + "/inbox.crt"] + (resume ? ["--resume"] : []))
                return try #require(jsonLines(output).first { $0["saved"] != nil }, "\(output)")
            }
            let saved = try await python(false)
            #expect(saved["sha256"] as? String == expected && number(saved["transferred"]) == 8 << 20, "\(saved)")
            // Half of it as a .part: the resume sends the other half.
            try FileManager.default.removeItem(atPath: inboxFolder + "/py.bin")
            try await lab.run(["exec", "h1", "--", "sh", "-c", "head -c \(4 << 20) '\(file)' > '\(inboxFolder)/\(part("py.bin", from: laptop.peerID))'"])
            let resumed = try await python(true)
            #expect(number(resumed["transferred"]) == 4 << 20, "\(resumed)")
        }
        #expect(try await sha256(lab, "h1", inboxFolder + "/py.bin") == expected)

        // nearby pipe to the Python echo server: what comes back is what went.
        let echo = try lab.start(
            ["exec", "h1", "--", ConnectionLabTests.python, "-u", peer, "echo-server", "9650", "--host", "0.0.0.0", "--identity", inbox.directory + "/identity.pem",
             "--trust", work + "/laptop.crt"])
        try await lab.withProcesses([echo]) {
            _ = try await echo.waitForLine(containing: "listening", timeout: .seconds(20))
            try await randomFile(lab, work + "/in.bin", bytes: 1 << 20)
            let piped = try await lab.run(
                ["exec", "h2", "--", "sh", "-c", "\(command(["pipe", "--host", Self.h1, "--port", "9650", "--state-dir", laptop.directory])) < '\(work)/in.bin' > '\(work)/out.bin'"])
            _ = piped
            #expect(try await sha256(lab, "h2", work + "/out.bin") == sha256(lab, "h2", work + "/in.bin"))
            let line = try await echo.waitForLine(containing: "\"done\"", timeout: .seconds(10))
            let summary = try #require(jsonLines(line).first, "\(line)")
            #expect(summary["ok"] as? Bool == true && (summary["violations"] as? [Any])?.isEmpty == true, "\(line)")
        }
    }
}
}
