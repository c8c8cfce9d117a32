import Foundation
import NIOCore
import PeerConnection
import PeerTrust
import Testing

@testable import FileTransfer

/// A sender and a receiver connected over loopback TLS, each with its own temporary folder.
private final class Setup: @unchecked Sendable {
    let client: PeerConnection
    let server: PeerConnection
    let listener: PeerListener
    let outbox: URL
    let inbox: URL
    private var incoming: IncomingStreams.AsyncIterator

    init() async throws {
        let serverIdentity = try PeerIdentity.generate(displayName: "Inbox")
        let clientIdentity = try PeerIdentity.generate(displayName: "Laptop")
        func configuration(_ identity: PeerIdentity, trusting other: PeerIdentity) -> PeerConnectionConfiguration {
            var configuration = PeerConnectionConfiguration(identity: identity, trust: TrustEvaluator(policy: .pinned([other.peerID])))
            configuration.setupTimeout = .seconds(5)
            return configuration
        }
        listener = try await PeerListener.listen(host: "127.0.0.1", port: 0, configuration: configuration(serverIdentity, trusting: clientIdentity))
        client = try await PeerConnection.connect(host: "127.0.0.1", port: listener.port, configuration: configuration(clientIdentity, trusting: serverIdentity))
        var accepted: PeerConnection?
        for await event in listener.events {
            if case .connected(let connection) = event {
                accepted = connection
                break
            }
        }
        server = try #require(accepted)
        incoming = server.incomingStreams.makeAsyncIterator()
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("nearby-files-\(UUID().uuidString)")
        outbox = base.appendingPathComponent("out")
        inbox = base.appendingPathComponent("in")
        try FileManager.default.createDirectory(at: outbox, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
    }

    /// The next stream the sender opens, received into the inbox; what the receiver reported.
    func receiveNext(maximumSize: Int64? = nil) async -> (updates: [TransferUpdate], error: FileTransferError?) {
        guard let stream = await incoming.next() else { return ([], FileTransferError(.interrupted, "no stream")) }
        var updates: [TransferUpdate] = []
        do {
            for try await update in FileReceiver(directory: inbox.path, maximumSize: maximumSize).receive(stream, from: server.peerID) {
                updates.append(update)
            }
            return (updates, nil)
        } catch {
            return (updates, error)
        }
    }

    func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let url = outbox.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        return url.path
    }

    func received(_ name: String) -> [UInt8]? {
        (try? Data(contentsOf: inbox.appendingPathComponent(name))).map { [UInt8]($0) }
    }

    /// The receiver's partial file for `name` from this sender.
    func part(_ name: String) -> String { FileReceiver.partialName(for: name, sender: server.peerID) }

    func inboxNames() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: inbox.path)) ?? []).sorted()
    }

    func stop() async {
        await client.close()
        await listener.close()
        try? FileManager.default.removeItem(at: outbox.deletingLastPathComponent())
    }
}

private func send(_ items: [FileSender.Item], _ setup: Setup, resume: Bool = false) async -> (updates: [TransferUpdate], error: FileTransferError?) {
    var updates: [TransferUpdate] = []
    do {
        for try await update in FileSender.send(items, over: setup.client, resume: resume) { updates.append(update) }
        return (updates, nil)
    } catch {
        return (updates, error)
    }
}

private func finished(_ updates: [TransferUpdate]) -> [TransferResult] {
    updates.compactMap { if case .finished(let result) = $0 { result } else { nil } }
}

private func noise(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}

@Suite("files: send and receive over a loopback connection")
struct FileTransferLoopbackTests {
    @Test("a file arrives whole under its name, with its modification time; both sides report the same SHA-256")
    func sendOne() async throws {
        let setup = try await Setup()
        let bytes = noise(3_000_000)
        let path = try setup.file("build.tar", bytes)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_700_000_000)], ofItemAtPath: path)
        async let receiving = setup.receiveNext()
        let sent = await send([FileSender.Item(path: path, name: "build.tar")], setup)
        let received = await receiving
        #expect(sent.error == nil && received.error == nil, "\(String(describing: sent.error)) \(String(describing: received.error))")
        let here = try #require(finished(sent.updates).first)
        let there = try #require(finished(received.updates).first)
        #expect(here.sha256 == there.sha256 && here.transferred == 3_000_000 && here.savedAs == "build.tar")
        #expect(setup.received("build.tar") == bytes)
        #expect(setup.inboxNames() == ["build.tar"])
        let modified = try FileManager.default.attributesOfItem(atPath: setup.inbox.appendingPathComponent("build.tar").path)[.modificationDate] as? Date
        #expect(modified == Date(timeIntervalSince1970: 1_700_000_000))
        await setup.stop()
    }

    @Test("--resume continues a .part whose first bytes match, sending only the rest; a .part that differs starts over")
    func resume() async throws {
        let setup = try await Setup()
        let bytes = noise(2_000_000, seed: 7)
        let path = try setup.file("big.iso", bytes)
        try Data(bytes[0..<1_200_000]).write(to: setup.inbox.appendingPathComponent(setup.part("big.iso")))
        async let receiving = setup.receiveNext()
        let sent = await send([FileSender.Item(path: path, name: "big.iso")], setup, resume: true)
        _ = await receiving
        #expect(finished(sent.updates).first?.transferred == 800_000)
        #expect(setup.received("big.iso") == bytes && setup.inboxNames() == ["big.iso"])

        // A .part of another file with that name: its first bytes do not match, so all is sent.
        var other = bytes
        other[10] ^= 0xFF
        let path2 = try setup.file("disk.img", other)
        try Data(bytes[0..<500_000]).write(to: setup.inbox.appendingPathComponent(setup.part("disk.img")))
        async let again = setup.receiveNext()
        let second = await send([FileSender.Item(path: path2, name: "disk.img")], setup, resume: true)
        _ = await again
        #expect(finished(second.updates).first?.transferred == 2_000_000)
        #expect(setup.received("disk.img") == other)
        await setup.stop()
    }

    @Test("a name that is taken gets a number; several files and folders go in order")
    func namesAndFolders() async throws {
        let setup = try await Setup()
        try Data("old".utf8).write(to: setup.inbox.appendingPathComponent("notes.txt"))
        let folder = setup.outbox.appendingPathComponent("project")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("src"), withIntermediateDirectories: true)
        try Data("a".utf8).write(to: folder.appendingPathComponent("src/a.swift"))
        try Data("b".utf8).write(to: folder.appendingPathComponent("README"))
        try Data("hidden".utf8).write(to: folder.appendingPathComponent(".env"))
        let notes = try setup.file("notes.txt", Array("new".utf8))
        let (items, skipped) = try await FileSender.items(for: [notes, folder.path], recursive: true)
        #expect(items.map(\.shownName) == ["notes.txt", "project/README", "project/src/a.swift"])
        #expect(skipped.count == 1 && skipped[0].reason.contains("dot"))
        let receiver = Task {
            var results: [TransferResult] = []
            for _ in 0..<3 { results += finished(await setup.receiveNext().updates) }
            return results
        }
        let sent = await send(items, setup)
        #expect(sent.error == nil)
        #expect(finished(sent.updates).map(\.savedAs) == ["notes (2).txt", "project/README", "project/src/a.swift"])
        _ = await receiver.value
        #expect(setup.received("notes.txt") == Array("old".utf8) && setup.received("notes (2).txt") == Array("new".utf8))
        #expect(setup.received("project/src/a.swift") == Array("a".utf8))
        await #expect(throws: FileTransferError.self) { try await FileSender.items(for: [folder.path], recursive: false) }
        await setup.stop()
    }

    @Test("hostile names are declined one by one, nothing is written; an absurd size is declined for want of space")
    func hostileOffers() async throws {
        let setup = try await Setup()
        let path = try setup.file("x", [1, 2, 3])
        for (name, folders) in [("../escape", [String]()), ("x", [".."]), ("x", ["a/b"]), (".profile", []), ("a\u{1B}]0;pwned\u{7}", []), ("x", ["/etc"])] {
            async let receiving = setup.receiveNext()
            let sent = await send([FileSender.Item(path: path, name: name, folders: folders)], setup)
            let received = await receiving
            #expect(sent.error?.code == .declined, "\(name) \(folders): \(String(describing: sent.error))")
            #expect(received.error?.code == .declined)
            #expect(sent.error?.message.contains("refused name") == true)
        }
        #expect(setup.inboxNames().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: setup.outbox.deletingLastPathComponent().appendingPathComponent("escape").path))
        // A peer declaring 2^50 bytes.
        let stream = try await setup.client.openStream(label: TransferProtocol.label)
        async let receiving = setup.receiveNext()
        try await stream.write(TransferProtocol.frame(TransferProtocol.Offer(name: "huge", size: 1 << 50, resume: false).json))
        var reader = StreamReader(stream)
        let answer = try #require(try await reader.message())
        #expect(answer["accept"] == .bool(false) && answer["reason"]?.stringValue?.contains("not enough space") == true)
        #expect(await receiving.error?.code == .declined)
        // And one over the receiver's own limit.
        async let limited = setup.receiveNext(maximumSize: 2)
        let over = await send([FileSender.Item(path: path, name: "x")], setup)
        #expect(over.error?.message.contains("over the 2") == true)
        _ = await limited
        await setup.stop()
    }

    @Test("bytes that do not hash as the sender says: nothing under the final name, the .part removed, both sides told")
    func hashMismatch() async throws {
        let setup = try await Setup()
        let stream = try await setup.client.openStream(label: TransferProtocol.label)
        async let receiving = setup.receiveNext()
        var reader = StreamReader(stream)
        try await stream.write(TransferProtocol.frame(TransferProtocol.Offer(name: "data.bin", size: 4, resume: false).json))
        _ = try await reader.message()
        try await stream.write(TransferProtocol.frame(TransferProtocol.start(0)))
        try await stream.write([1, 2, 3, 4])
        try await stream.write(TransferProtocol.frame(TransferProtocol.trailer(sha256: String(repeating: "0", count: 64))))
        try await stream.finish()
        let outcome = try #require(try await reader.message())
        #expect(outcome["kind"]?.stringValue == "verification" && outcome["failed"]?.stringValue?.contains("SHA-256") == true)
        #expect(await receiving.error?.code == .verification)
        #expect(setup.inboxNames().isEmpty)
        await setup.stop()
    }

    @Test("a sender that stops half way leaves the .part for a resume and nothing under the final name; the receiver says how far it got")
    func senderCancels() async throws {
        let setup = try await Setup()
        let bytes = noise(8 << 20, seed: 3)
        let path = try setup.file("video.mp4", bytes)
        async let receiving = setup.receiveNext()
        let sender = Task { () -> FileTransferError? in
            do throws(FileTransferError) {
                for try await update in FileSender.send([FileSender.Item(path: path, name: "video.mp4")], over: setup.client, interval: .zero) {
                    if case .progress(let progress) = update, progress.done > 1 << 20 { return nil }  // stops iterating: cancels
                }
                return nil
            } catch {
                return error
            }
        }
        _ = await sender.value
        let received = await receiving
        #expect(received.error?.code == .interrupted, "\(String(describing: received.error))")
        #expect(received.error?.message.contains("kept for --resume") == true)
        #expect(setup.inboxNames() == [setup.part("video.mp4")])
        async let resumed = setup.receiveNext()
        let again = await send([FileSender.Item(path: path, name: "video.mp4")], setup, resume: true)
        _ = await resumed
        let result = try #require(finished(again.updates).first)
        #expect(result.transferred < 8 << 20 && result.transferred > 0)
        #expect(setup.received("video.mp4") == bytes && setup.inboxNames() == ["video.mp4"])
        await setup.stop()
    }

    @Test("another sender's partial file is neither resumed nor revealed nor replaced, and a user's own NAME.part is never touched; an absurd modification time is ignored, not a crash")
    func partialsBelongToTheirSender() async throws {
        let setup = try await Setup()
        let bytes = noise(1_000_000, seed: 11)
        let path = try setup.file("secret.tar", bytes)
        let stranger = try PeerIdentity.generate(displayName: "Stranger")
        let theirs = setup.inbox.appendingPathComponent(FileReceiver.partialName(for: "secret.tar", sender: stranger.peerID))
        let mine = setup.inbox.appendingPathComponent("secret.tar.part")
        try Data(bytes[0..<400_000]).write(to: theirs)
        try Data("the user's own file".utf8).write(to: mine)
        async let receiving = setup.receiveNext()
        let sent = await send([FileSender.Item(path: path, name: "secret.tar")], setup, resume: true)
        _ = await receiving
        #expect(finished(sent.updates).first?.transferred == 1_000_000, "nothing was resumed from another sender's partial")
        #expect(try Data(contentsOf: theirs) == Data(bytes[0..<400_000]))
        #expect(try Data(contentsOf: mine) == Data("the user's own file".utf8))
        #expect(setup.received("secret.tar") == bytes)

        let stream = try await setup.client.openStream(label: TransferProtocol.label)
        async let again = setup.receiveNext()
        var reader = StreamReader(stream)
        let offer: JSONValue = .object(["name": .string("t.bin"), "size": .integer(2), "modified": .number(1e300)])
        try await stream.write(TransferProtocol.frame(offer))
        _ = try await reader.message()
        try await stream.write(TransferProtocol.frame(TransferProtocol.start(0)))
        try await stream.write([1, 2])
        try await stream.write(TransferProtocol.frame(TransferProtocol.trailer(sha256: "a12871fee210fb8619291eaea194581cbd2531e4b23759d225f6806923f63222")))
        try await stream.finish()
        #expect(try await reader.message()?["saved"]?.stringValue == "t.bin")
        #expect(await again.error == nil)
        await setup.stop()
    }

    @Test("the rate and time left come from the last seconds, reported once an interval")
    func progressMeter() {
        var meter = ProgressMeter(name: "f", size: 1000, resumedAt: 100, interval: .milliseconds(250), at: .zero)
        #expect(meter.update(done: 150, at: .milliseconds(100)) == nil)
        let first = meter.update(done: 200, at: .milliseconds(500))
        #expect(first?.rate == 200 && first?.secondsLeft == 4)
        #expect(first?.fraction == 0.2)
        let later = meter.update(done: 800, at: .seconds(4))
        #expect(later.map { Int($0.rate ?? 0) } == 171)  // (800 - 200) bytes over 3.5 s: the first sample has aged out
    }
}
