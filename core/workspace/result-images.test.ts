import { describe, expect, it } from 'vitest';
import { sniffImage } from './result-images';

describe('sniffImage: the format from the bytes, never the name', () => {
  it('knows the five formats by their own bytes', () => {
    expect(sniffImage(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]))).toBe('image/png');
    expect(sniffImage(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg');
    expect(sniffImage(Buffer.from('GIF89a\x01\x00', 'latin1'))).toBe('image/gif');
    expect(sniffImage(Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8 ')]))).toBe('image/webp');
    expect(sniffImage(Buffer.from('\uFEFF<?xml version="1.0"?>\n<!-- c -->\n<!DOCTYPE svg>\n<svg xmlns="http://www.w3.org/2000/svg"/>'))).toBe('image/svg+xml');
  });

  it('calls anything else not an image: HTML, text, an SVG-looking name on other markup', () => {
    expect(sniffImage(Buffer.from('<html><script>alert(1)</script></html>'))).toBeUndefined();
    expect(sniffImage(Buffer.from('<svgx>not svg</svgx>'))).toBeUndefined();
    expect(sniffImage(Buffer.from('hello'))).toBeUndefined();
    expect(sniffImage(Buffer.alloc(0))).toBeUndefined();
  });
});
