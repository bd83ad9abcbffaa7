//! JPEG decoding with libjpeg-turbo's own decoder, so images are bit-identical to what OpenCV
//! (`cv2.imread`, the official loader) and Pillow produce.
//!
//! The C sources come vendored in the `mozjpeg-sys` crate (MozJPEG changes only the encoder of
//! libjpeg-turbo) and are compiled with `cc`: no system library, no nasm, no download. Without
//! nasm the SIMD kernels are left out; libjpeg-turbo's SIMD and C paths give the same bits.
//! The settings are libjpeg's defaults, which OpenCV keeps: the accurate integer IDCT
//! (`JDCT_ISLOW`) and "fancy" (triangle-filter) chroma upsampling.
//!
//! libjpeg reports fatal errors through `error_exit`, which must not return. Ours unwinds with
//! the formatted message (the C code is built with `-fexceptions`, and the callbacks are
//! `extern "C-unwind"`); [`decode_jpeg`] catches it and returns it as an error.

use std::ffi::{c_char, c_int, c_ulong, CStr};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use mozjpeg_sys::{
    boolean, jpeg_common_struct, jpeg_create_decompress, jpeg_decompress_struct,
    jpeg_destroy_decompress, jpeg_error_mgr, jpeg_finish_decompress, jpeg_mem_src,
    jpeg_read_header, jpeg_read_scanlines, jpeg_save_markers, jpeg_start_decompress,
    jpeg_std_error, JDIMENSION, J_COLOR_SPACE,
};

use crate::orientation::exif_orientation;

/// libjpeg's `JPEG_APP0 + 1`, the marker that holds EXIF data.
const APP1: c_int = 0xE1;
/// libjpeg's `JMSG_LENGTH_MAX`.
const MESSAGE_LENGTH: usize = 200;
/// The largest decoded image accepted, in bytes (as for PNG): a corrupt or hostile header can
/// claim up to 65500 x 65500 pixels.
const MEMORY_LIMIT: usize = 1 << 30;

/// A decoded JPEG: interleaved RGB rows as stored (no orientation applied), and the EXIF
/// orientation tag when the file has a valid one.
pub struct Jpeg {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<u8>,
    pub orientation: Option<u8>,
}

/// What `error_exit` unwinds with.
struct LibjpegError(String);

/// Decodes `bytes` (a whole JPEG file). The error is libjpeg's message, e.g. "Premature end of
/// JPEG file" or "Not a JPEG file: starts with 0x89 0x50".
pub fn decode_jpeg(bytes: &[u8]) -> Result<Jpeg, String> {
    // Boxed so the addresses libjpeg keeps (the error manager) stay put.
    let mut errors: Box<jpeg_error_mgr> = Box::new(unsafe { std::mem::zeroed() });
    let mut info: Box<jpeg_decompress_struct> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: `jpeg_std_error` fills the zeroed manager with libjpeg's defaults; we then replace
    // the two callbacks that would exit the process or print to stderr.
    unsafe {
        info.common.err = jpeg_std_error(&mut errors);
    }
    errors.error_exit = Some(unwind_with_message);
    errors.output_message = Some(ignore_message);
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `info` has its error manager; `bytes` outlives the decompressor.
        unsafe {
            jpeg_create_decompress(&mut *info);
            decode_with(&mut info, bytes)
        }
    }));
    // SAFETY: destroying is valid after creation in any state, also after an error, and a
    // no-op on a zeroed struct (creation itself failed before allocating anything).
    unsafe {
        jpeg_destroy_decompress(&mut info);
    }
    match result {
        Ok(decoded) => decoded,
        Err(payload) => match payload.downcast::<LibjpegError>() {
            Ok(error) => Err(error.0),
            // Not libjpeg's error: a bug, keep it a panic.
            Err(payload) => resume_unwind(payload),
        },
    }
}

/// The decoding proper, on a created decompressor.
///
/// # Safety
/// `info` must have been created with `jpeg_create_decompress` and have an error manager that
/// unwinds; `bytes` must outlive `info`'s use of it.
unsafe fn decode_with(info: &mut jpeg_decompress_struct, bytes: &[u8]) -> Result<Jpeg, String> {
    jpeg_mem_src(info, bytes.as_ptr(), bytes.len() as c_ulong);
    jpeg_save_markers(info, APP1, 0xFFFF);
    jpeg_read_header(info, boolean::from(true));
    let orientation = exif_orientation(app1_segments(info));
    // As OpenCV: CMYK (and YCCK, converted to CMYK by libjpeg) is turned into RGB below, every
    // other colour space (YCbCr, grey, RGB) by libjpeg.
    let cmyk = info.num_components == 4;
    info.out_color_space = if cmyk {
        J_COLOR_SPACE::JCS_CMYK
    } else {
        J_COLOR_SPACE::JCS_EXT_RGB
    };
    let (width, height) = (info.image_width as usize, info.image_height as usize);
    if width * height * 4 > MEMORY_LIMIT {
        return Err(format!(
            "{width}x{height} pixels: larger than the {} MiB a decoded image may take",
            MEMORY_LIMIT >> 20
        ));
    }
    jpeg_start_decompress(info);
    let width = info.output_width as usize;
    let height = info.output_height as usize;
    let channels = info.output_components as usize;
    let stride = width * channels;
    if stride == 0 || height == 0 {
        return Err("the image is empty".to_string());
    }
    let mut pixels = vec![0u8; stride * height];
    let mut rows: Vec<*mut u8> = pixels
        .chunks_exact_mut(stride)
        .map(|r| r.as_mut_ptr())
        .collect();
    while (info.output_scanline as usize) < height {
        let next = info.output_scanline as usize;
        let read = jpeg_read_scanlines(
            info,
            rows[next..].as_mut_ptr(),
            (height - next) as JDIMENSION,
        );
        if read == 0 {
            // Only a suspending data source returns no row; the memory source never does.
            resume_unwind(Box::new(LibjpegError(
                "the decoder returned no rows".into(),
            )));
        }
    }
    jpeg_finish_decompress(info);
    rows.clear();
    let rgb = if cmyk { cmyk_to_rgb(&pixels) } else { pixels };
    Ok(Jpeg {
        width,
        height,
        rgb,
        orientation,
    })
}

/// The payloads of the APP1 segments libjpeg saved while reading the header.
///
/// # Safety
/// `info` must have read its header with APP1 markers saved.
unsafe fn app1_segments(info: &jpeg_decompress_struct) -> Vec<&[u8]> {
    let mut segments = Vec::new();
    let mut marker = info.marker_list;
    while let Some(saved) = marker.as_ref() {
        if c_int::from(saved.marker) == APP1 && !saved.data.is_null() {
            segments.push(std::slice::from_raw_parts(
                saved.data,
                saved.data_length as usize,
            ));
        }
        marker = saved.next;
    }
    segments
}

/// OpenCV's `icvCvt_CMYK2BGR_8u_C4C3R`: `channel = k - (255 - channel) * k / 256` (a shift, not a
/// division by 255), for C, M, Y into R, G, B.
fn cmyk_to_rgb(cmyk: &[u8]) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(cmyk.len() / 4 * 3);
    for px in cmyk.chunks_exact(4) {
        let k = i32::from(px[3]);
        for &channel in &px[..3] {
            rgb.push((k - (((255 - i32::from(channel)) * k) >> 8)) as u8);
        }
    }
    rgb
}

/// libjpeg's `error_exit`: format the message and unwind to [`decode_jpeg`].
unsafe extern "C-unwind" fn unwind_with_message(info: &mut jpeg_common_struct) {
    let mut buffer = [0 as c_char; MESSAGE_LENGTH];
    let message = match info.err.as_ref().and_then(|e| e.format_message) {
        Some(format) => {
            // mozjpeg-sys declares the buffer as `&[u8; 80]`; libjpeg writes up to
            // JMSG_LENGTH_MAX bytes into it, so hand it a writable buffer of that size.
            let format: unsafe extern "C-unwind" fn(&mut jpeg_common_struct, *mut c_char) =
                std::mem::transmute(format);
            format(info, buffer.as_mut_ptr());
            CStr::from_ptr(buffer.as_ptr())
                .to_string_lossy()
                .into_owned()
        }
        None => "libjpeg error".to_string(),
    };
    resume_unwind(Box::new(LibjpegError(message)));
}

/// libjpeg's `output_message` prints warnings (e.g. "Corrupt JPEG data: 3 extraneous bytes")
/// to stderr; decoding goes on exactly as in OpenCV, so a loader stays quiet.
unsafe extern "C-unwind" fn ignore_message(_info: &mut jpeg_common_struct) {}

#[cfg(test)]
#[path = "jpeg_tests.rs"]
mod tests;
