import PeerConnection
import Testing

@testable import FileTransfer

/// The sending side of a file's exchange, driven by hand: no stream, no file, no clock.
@Suite("the sender's exchange")
struct SendExchangeTests {
    let offer = TransferProtocol.Offer(name: "build.tar", folders: ["out"], size: 1000, modified: nil, resume: true)

    func accepted(offset: Int64, prefix: String? = nil) -> JSONValue {
        TransferProtocol.Answer.accept(offset: offset, prefixSHA256: prefix).json
    }

    func failure(_ steps: [SendExchange.Step]) -> (FileTransferError, ExchangeReset?)? {
        guard steps.count == 1, case .failed(let error, let reset) = steps[0] else { return nil }
        return (error, reset)
    }

    @Test("a fresh file: offer, answer, start at 0, the bytes, the trailer with a half-close, then saved")
    func wholeFile() {
        var exchange = SendExchange(offer: offer)
        #expect(exchange.begin() == [.send(offer.json), .readMessage])
        #expect(exchange.received(accepted(offset: 0)) == [.send(TransferProtocol.start(0)), .sendBytes(from: 0)])
        #expect(exchange.bytesSent(sha256: "ab12") == [.send(TransferProtocol.trailer(sha256: "ab12")), .finishStream, .readMessage])
        #expect(exchange.received(TransferProtocol.saved("out/build.tar")) == [.saved(savedAs: "out/build.tar", start: 0)])
        #expect(exchange.phase == .done)
    }

    @Test("a resume whose prefix hashes the same continues from the receiver's offset (the expected digest in lower case)")
    func resumeMatches() {
        var exchange = SendExchange(offer: offer)
        _ = exchange.begin()
        #expect(exchange.received(accepted(offset: 400, prefix: "ABCD")) == [.checkPrefix(count: 400, expected: "abcd")])
        #expect(exchange.prefixChecked(matches: true) == [.send(TransferProtocol.start(400)), .sendBytes(from: 400)])
        _ = exchange.bytesSent(sha256: "ff")
        #expect(exchange.received(TransferProtocol.saved("build.tar")) == [.saved(savedAs: "build.tar", start: 400)])
    }

    @Test("a resume whose prefix differs starts again from 0; an offset without a prefix is not trusted")
    func resumeDiffers() {
        var exchange = SendExchange(offer: offer)
        _ = exchange.begin()
        _ = exchange.received(accepted(offset: 400, prefix: "abcd"))
        #expect(exchange.prefixChecked(matches: false) == [.send(TransferProtocol.start(0)), .sendBytes(from: 0)])
        var blind = SendExchange(offer: offer)
        _ = blind.begin()
        #expect(blind.received(accepted(offset: 400)) == [.send(TransferProtocol.start(0)), .sendBytes(from: 0)])
    }

    @Test("a decline fails with the receiver's reason and resets the stream")
    func declined() throws {
        var exchange = SendExchange(offer: offer)
        _ = exchange.begin()
        let (error, reset) = try #require(failure(exchange.received(TransferProtocol.Answer.decline("not enough space").json)))
        #expect(error == FileTransferError(.declined, "out/build.tar was declined: not enough space"))
        #expect(reset == ExchangeReset(reason: "declined", code: .cancelled))
    }

    @Test("answers that break the rules are protocol errors, and the stream is reset as one", arguments: [
        JSONValue.object(["accept": .string("yes")]),
        JSONValue.object(["accept": .bool(true)]),
        JSONValue.object(["accept": .bool(true), "offset": .integer(-1)]),
        JSONValue.object(["accept": .bool(true), "offset": .integer(1001), "prefix_sha256": .string("ab")]),
    ])
    func brokenAnswers(_ answer: JSONValue) throws {
        var exchange = SendExchange(offer: offer)
        _ = exchange.begin()
        let (error, reset) = try #require(failure(exchange.received(answer)))
        #expect(error.code == .protocolError)
        #expect(reset?.code == .protocolError)
        #expect(exchange.phase == .done)
    }

    @Test("a stream that ends before the answer or before the outcome is an interruption, with nothing reset")
    func endedEarly() throws {
        var early = SendExchange(offer: offer)
        _ = early.begin()
        let (first, firstReset) = try #require(failure(early.received(nil)))
        #expect(first == FileTransferError(.interrupted, "the receiver closed the stream without an answer"))
        #expect(firstReset == nil)
        var late = SendExchange(offer: offer)
        _ = late.begin()
        _ = late.received(accepted(offset: 0))
        _ = late.bytesSent(sha256: "00")
        let (second, _) = try #require(failure(late.received(nil)))
        #expect(second.code == .interrupted)
    }

    @Test("the receiver's failure keeps its kind when the exchange defines it, else is an interruption", arguments: [
        ("verification", FileTransferError.Code.verification), ("file", .file), ("declined", .declined), ("weird", .interrupted),
    ])
    func outcomeKinds(_ kind: String, _ code: FileTransferError.Code) throws {
        var exchange = SendExchange(offer: offer)
        _ = exchange.begin()
        _ = exchange.received(accepted(offset: 0))
        _ = exchange.bytesSent(sha256: "00")
        let (error, reset) = try #require(failure(exchange.received(.object(["failed": .string("disk full"), "kind": .string(kind)]))))
        #expect(error == FileTransferError(code, "the receiver did not keep out/build.tar: disk full"))
        #expect(reset == nil)
    }

    @Test("events out of order end the exchange instead of going on")
    func misuse() throws {
        var exchange = SendExchange(offer: offer)
        let (error, reset) = try #require(failure(exchange.bytesSent(sha256: "00")))
        #expect(error.code == .protocolError && error.message.hasPrefix("internal error"))
        #expect(reset?.code == .failed)
        #expect(exchange.begin().count == 1)
        var twice = SendExchange(offer: offer)
        _ = twice.begin()
        #expect(failure(twice.prefixChecked(matches: true)) != nil)
    }
}
