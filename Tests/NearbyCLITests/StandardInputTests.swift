import Foundation
import Testing

@testable import nearby

/// stdin as lines and as chunks, read from a pipe this test fills and closes first (the reading
/// thread then only has what is there: nothing depends on timing).
@Suite("stdin: one reader, lines or chunks")
struct StandardInputTests {
    /// A reader of a pipe that holds `bytes` and is closed.
    func input(_ bytes: [UInt8]) throws -> StandardInput {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let written = bytes.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) }
        try #require(written == bytes.count)
        close(ends[1])
        return StandardInput(descriptor: ends[0])
    }

    @Test("lines lose their \\n or \\r\\n, an empty line is a line, the last needs no newline, then the end")
    func lines() async throws {
        let stdin = try input(Array("one\r\ntwo\n\nthree".utf8))
        var read: [String] = []
        while let line = await stdin.next() { read.append(line) }
        #expect(read == ["one", "two", "", "three"])
        #expect(await stdin.next() == nil)
    }

    @Test("bytes that are not UTF-8 become U+FFFD in a line; chunks come as they were written")
    func chunks() async throws {
        let odd = try input([0x61, 0xFF, 0x62, 10])
        #expect(await odd.next() == "a\u{FFFD}b")
        let raw = try input([0, 1, 2, 255, 10, 13])
        var bytes: [UInt8] = []
        while let chunk = await raw.nextChunk() { bytes += chunk }
        #expect(bytes == [0, 1, 2, 255, 10, 13])
    }

    @Test("chunks after lines begin with what was read and not taken as a line")
    func chunksAfterLines() async throws {
        let stdin = try input(Array("first\nsecond\nrest".utf8))
        #expect(await stdin.next() == "first")
        var bytes: [UInt8] = []
        while let chunk = await stdin.nextChunk() { bytes += chunk }
        #expect(String(decoding: bytes, as: UTF8.self) == "second\nrest")
    }

    @Test("a cancelled wait for a chunk returns nil at once")
    func cancelled() async throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[1]) }  // ends the reading thread's read after the test
        let stdin = StandardInput(descriptor: ends[0])
        let waiting = Task { await stdin.nextChunk() }
        waiting.cancel()
        #expect(await waiting.value == nil)
    }
}
